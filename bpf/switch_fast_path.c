// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
// The switch's in-kernel fast path (the OVS-eBPF idea of seed 002): one program attached to
// every AF_XDP port of a bridge. A packet whose exact header fields user space has already
// decided on ("send it out of port N", nothing else) is counted and redirected to port N
// here; every other packet goes to the AF_XDP socket of its port and queue, or on to the
// stack where no socket is registered.
//
// The key holds every byte the user-space flow key (FlowKey::parse_with_offsets) is made
// from, for the packets this parser accepts: Ethernet, at most one 802.1Q tag, IPv4 with a
// 20-byte header, not a fragment, carrying TCP, UDP or ICMP whose header the IPv4 total
// length covers, and no TCP or UDP checksum left partial by its sender (user space completes
// those). Two packets with the same key therefore get the same decision.
// crates/xdp/src/fast_path/key.rs is the same parser in Rust; keep them together.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "kernel_net.h"

#define MAX_PORTS 64
#define MAX_QUEUES 64
#define MAX_FLOWS 262144
#define VLAN_PRESENT 0x1000
// Entries fall in FP_CLASSES classes (by a hash of their key, chosen in user space), so a rule
// change can stop the kernel forwarding on the classes of the entries it touches and leave
// the rest forwarding.
#define FP_CLASSES 64

struct fp_key {
	__u32 ifindex;
	__u8 dl_dst[6];
	__u8 dl_src[6];
	__be16 vlan_tci; // VLAN_PRESENT in the DEI bit's place when tagged, 0 when not
	__be16 dl_type;
	__be32 nw_src;
	__be32 nw_dst;
	__u8 nw_proto;
	__u8 nw_tos; // the whole byte: DSCP and ECN (nw_ecn) are both matched
	__u8 nw_ttl;
	__u8 pad;
	__u8 l4[4]; // TCP/UDP ports, or ICMP type and code then two zeros
};

struct fp_action {
	__u16 out_slot; // the output port's slot (fp_devs, fp_tx)
	__u16 class; // below FP_CLASSES
	__u32 generation; // valid only while equal to fp_validity's, and its class not stopped
	__u64 packets;
	__u64 bytes;
	__u64 tcp_flags; // TCP's flags (12 bits) of every packet forwarded, ORed
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FLOWS);
	__type(key, struct fp_key);
	__type(value, struct fp_action);
} fp_flows SEC(".maps");

// Which entries the program may forward on. One word for all classes, so user space stops or
// resumes any set of them in one write; a reader may see a write half done, which is why
// user space waits for the program after a stop.
struct fp_validity {
	__u32 generation;
	__u32 pad;
	__u64 stopped; // bit c: the entries of class c are stopped
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_validity);
} fp_validity SEC(".maps");

// ifindex -> the port's slot; the socket of (slot, queue) is xsks[slot * MAX_QUEUES + queue].
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} fp_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_PORTS * MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

// slot -> the port's ifindex, to redirect to.
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} fp_devs SEC(".maps");

// What the kernel failed to send out of each port (by slot) after a redirect here: frames
// dropped and the last error. The kernel tells no one but its tracepoints (below) when a
// redirected frame cannot go out, and on a veth whose peer has no NAPI (no XDP program,
// GRO off) none can (EOPNOTSUPP when the redirect is queued, or ENXIO when it is sent):
// the port is then blocked (fp_blocked), and its flows go up to user space instead of into
// a hole until user space clears the flag to try again.
struct fp_tx {
	__u64 failed;
	__s32 err;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, struct fp_tx);
} fp_tx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} fp_blocked SEC(".maps");

// Set by user space: the cookie of the network namespace the ports are in (tracepoints see
// every namespace, where the same ifindex can name another device) and fp_devs' map id.
struct fp_config {
	__u64 netns_cookie;
	__u32 devs_map_id;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_config);
} fp_config SEC(".maps");

// A map-in-map nobody reads: updating it makes the kernel wait until every program run
// in progress has finished (maybe_wait_bpf_programs), so after a generation change user
// space knows no packet is still being forwarded on an old entry.
struct fp_barrier_inner_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
};

struct fp_barrier_inner_map fp_barrier_inner SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct fp_barrier_inner_map);
} fp_barrier SEC(".maps");

// Packets forwarded here; packets sent up to a socket; of those, how many had an entry
// made stale (by a rule change, or suspended while one was made), and how many an entry
// to a blocked port.
enum { FP_HIT, FP_MISS, FP_STALE, FP_BLOCKED, FP_COUNTERS };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FP_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} fp_counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&fp_counters, &which);

	if (n)
		*n += 1;
}

// Whether a TCP or UDP checksum `field` holds just the pseudo-header sum of the IPv4 header
// at `l3`: the sender left it to checksum offload (veth's default), and user space completes
// it before the packet goes on, so it is not taken here.
static __always_inline int partial_checksum(__u8 *l3, __u8 *field, __u32 total)
{
	__u32 sum = ((__u32)l3[12] << 8 | l3[13]) + ((__u32)l3[14] << 8 | l3[15]) +
		    ((__u32)l3[16] << 8 | l3[17]) + ((__u32)l3[18] << 8 | l3[19]);

	sum += l3[9] + (total - 20);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (((__u32)field[0] << 8) | field[1]) == sum;
}

// Fills `key` (zeroed by the caller) and returns 0 when the packet is one the fast path takes;
// a TCP segment's flags (not in the key: any flags take the flow's entry) go in `tcp_flags`.
static __always_inline int parse(struct xdp_md *ctx, struct fp_key *key, __u64 *tcp_flags)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__be16 type;
	__u8 *l3, *l4;
	__u32 avail, total;

	if ((void *)(eth + 1) > end)
		return -1;
	__builtin_memcpy(key->dl_dst, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(key->dl_src, eth->h_source, ETH_ALEN);
	type = eth->h_proto;
	l3 = (__u8 *)(eth + 1);
	if (type == bpf_htons(ETH_P_8021Q)) {
		__be16 *tag = (__be16 *)l3;

		if ((void *)(tag + 2) > end)
			return -1;
		key->vlan_tci = tag[0] | bpf_htons(VLAN_PRESENT);
		type = tag[1];
		l3 += 4;
	}
	if (type != bpf_htons(ETH_P_IP))
		return -1;
	key->dl_type = type;
	l4 = l3 + 20;
	// Every transport header we take is at least 8 bytes.
	if ((void *)(l4 + 8) > end)
		return -1;
	if (l3[0] != 0x45)
		return -1;
	// Not a fragment: no more-fragments flag, offset 0.
	if ((l3[6] & 0x3f) || l3[7])
		return -1;
	total = ((__u32)l3[2] << 8) | l3[3];
	avail = (__u32)((long)end - (long)l3);
	if (total > avail)
		return -1;
	key->nw_tos = l3[1];
	key->nw_ttl = l3[8];
	key->nw_proto = l3[9];
	__builtin_memcpy(&key->nw_src, l3 + 12, 4);
	__builtin_memcpy(&key->nw_dst, l3 + 16, 4);
	switch (key->nw_proto) {
	case IPPROTO_TCP: {
		__u32 header;

		if ((void *)(l4 + 20) > end || total < 40)
			return -1;
		header = (__u32)(l4[12] >> 4) * 4;
		if (header < 20 || header > total - 20)
			return -1;
		if (partial_checksum(l3, l4 + 16, total))
			return -1;
		__builtin_memcpy(key->l4, l4, 4);
		*tcp_flags = ((__u64)(l4[12] & 0x0f) << 8) | l4[13];
		return 0;
	}
	case IPPROTO_UDP: {
		__u32 length = ((__u32)l4[4] << 8) | l4[5];

		if (total < 28 || length < 8 || length > total - 20)
			return -1;
		if (partial_checksum(l3, l4 + 6, total))
			return -1;
		__builtin_memcpy(key->l4, l4, 4);
		return 0;
	}
	case IPPROTO_ICMP:
		if (total < 28)
			return -1;
		key->l4[0] = l4[0];
		key->l4[1] = l4[1];
		return 0;
	}
	return -1;
}

#ifdef FP_PROBE
// Built only into the test object (switch_fast_path_probe.o): what the parser made of the
// last frame, so a test can compare it with the Rust parser byte for byte.
struct fp_probe {
	__u32 accepted;
	struct fp_key key;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_probe);
} fp_probe SEC(".maps");

static __always_inline void probe(int parsed, struct fp_key *key)
{
	__u32 zero = 0;
	struct fp_probe *p = bpf_map_lookup_elem(&fp_probe, &zero);

	if (p) {
		p->accepted = parsed == 0;
		__builtin_memcpy(&p->key, key, sizeof(*key));
	}
}
#else
static __always_inline void probe(int parsed, struct fp_key *key)
{
}
#endif

// xdp.frags: interfaces with jumbo frames take it in native mode. A packet of several
// buffers is left to user space (whole, it is not known to fit the flow's way out).
SEC("xdp.frags")
int switch_fast_path(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex;
	__u32 queue = ctx->rx_queue_index;
	struct fp_key key;
	__u64 tcp_flags = 0;
	__u32 *slot, index;
	int parsed;

	__builtin_memset(&key, 0, sizeof(key));
	key.ifindex = ifindex;
	parsed = parse(ctx, &key, &tcp_flags);
	probe(parsed, &key);
	// Only the queues the bridge has a socket on are its port; the others' packets go on
	// to the stack, offloaded flow or not.
	slot = bpf_map_lookup_elem(&fp_ports, &ifindex);
	if (!slot || queue >= MAX_QUEUES)
		return XDP_PASS;
	index = *slot * MAX_QUEUES + queue;
	if (!bpf_map_lookup_elem(&xsks, &index))
		return XDP_PASS;
	if (parsed == 0 && bpf_xdp_get_buff_len(ctx) == ctx->data_end - ctx->data) {
		struct fp_action *action = bpf_map_lookup_elem(&fp_flows, &key);

		if (action) {
			__u32 zero = 0;
			// Read after the entry was found: user space removes an entry with its class
			// stopped, and resumes the class only once the program has been waited for.
			struct fp_validity *valid = bpf_map_lookup_elem(&fp_validity, &zero);

			if (valid && action->generation == valid->generation &&
			    !((valid->stopped >> (action->class % FP_CLASSES)) & 1)) {
				__u32 out = action->out_slot;
				__u32 *blocked = bpf_map_lookup_elem(&fp_blocked, &out);

				if (blocked && *blocked) {
					count(FP_BLOCKED);
				} else {
					__sync_fetch_and_add(&action->packets, 1);
					__sync_fetch_and_add(&action->bytes,
							     ctx->data_end - ctx->data);
					// Written only when a flag is new: most packets write nothing.
					if (tcp_flags & ~action->tcp_flags)
						__sync_fetch_and_or(&action->tcp_flags, tcp_flags);
					count(FP_HIT);
					return bpf_redirect_map(&fp_devs, out, 0);
				}
			} else {
				count(FP_STALE);
			}
		}
	}
	count(FP_MISS);
	return bpf_redirect_map(&xsks, index, XDP_PASS);
}

// The slot of `dev` when it is one of the bridge's ports (in the bridge's namespace).
static __always_inline __u32 *port_slot(const struct net_device *dev)
{
	__u32 zero = 0, ifindex;
	struct fp_config *config = bpf_map_lookup_elem(&fp_config, &zero);

	if (!config || !dev || dev->nd_net.net->net_cookie != config->netns_cookie)
		return 0;
	ifindex = dev->ifindex;
	return bpf_map_lookup_elem(&fp_ports, &ifindex);
}

// `frames` sent to port `slot` were dropped. An error means the port refused them (on veth
// without NAPI on its peer: EOPNOTSUPP or ENXIO): it is blocked, except for EMSGSIZE and
// EOVERFLOW, which are that frame's size or shape. No error (a partial send: the peer's
// ring was full) is overload, not a broken port. The error is written before the flag, so a
// reader that sees the flag (user space reads it first) sees the error.
static __always_inline void tx_failed(__u32 *slot, __u32 frames, int err)
{
	struct fp_tx *tx = bpf_map_lookup_elem(&fp_tx, slot);
	__u32 *blocked = bpf_map_lookup_elem(&fp_blocked, slot);

	if (!tx || !blocked)
		return;
	__sync_fetch_and_add(&tx->failed, frames);
	if (err < 0) {
		tx->err = err;
		if (err != -90 /* EMSGSIZE */ && err != -75 /* EOVERFLOW */)
			*blocked = 1;
	}
}

// A device's bulk queue was flushed (at the end of each redirecting NAPI poll): `drops` of
// its frames were not sent. Only queues filled on a bridge port count: the ports run this
// program only, so those frames are the fast path's.
SEC("tp_btf/xdp_devmap_xmit")
int fp_devmap_xmit(__u64 *ctx)
{
	const struct net_device *from = (void *)ctx[0], *to = (void *)ctx[1];
	int drops = (int)ctx[3], err = (int)ctx[4];
	__u32 *slot;

	if (drops <= 0 || !port_slot(from))
		return 0;
	slot = port_slot(to);
	if (slot)
		tx_failed(slot, drops, err);
	return 0;
}

// A redirect failed before it was queued (the port down, the frame over its MTU...).
SEC("tp_btf/xdp_redirect_err")
int fp_redirect_err(__u64 *ctx)
{
	int err = (int)ctx[3];
	__u32 map_id = (__u32)ctx[5], slot = (__u32)ctx[6], zero = 0;
	struct fp_config *config = bpf_map_lookup_elem(&fp_config, &zero);

	if (config && map_id == config->devs_map_id)
		tx_failed(&slot, 1, err);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
