// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
// The kernel transmit engine: run by BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES, every
// frame it returns XDP_TX for leaves through the interface named in the run's context, at
// XDP speed and with no socket in the way (the way xdp-trafficgen does it).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int xdp_live_tx(struct xdp_md *ctx)
{
	return XDP_TX;
}

// One template varied per frame (`gen --engine kernel`). Flows (`--flows N`): frame k of a
// CPU gets source port base_port + k % span and source address base_addr + k / span
// (stepping over the destination's), k cycling through 0..flows, the way the socket engine
// numbers flows. Stamps: the test
// payload gets this thread's generator id, the next sequence number and the send time
// (CLOCK_REALTIME, from the TAI clock plus an offset user space measured). The kernel
// initialises a live frame's page once and recycles it with whatever the program wrote, so
// every field is written whole and the checksums are computed from the template's, never
// from the page.
struct live_vary {
	__u32 flows; // 0 or 1: no flow variation
	__u32 span;
	__u32 base_addr; // host order
	__u16 base_port; // host order
	__u16 l3; // offset of the IPv4 header (20 bytes, no options), for flows
	__u16 check; // offset of the transport checksum in the frame; 0: none to update
	__u16 ip_check0; // the template's checksums, as they lie in the frame
	__u16 check0;
	__u16 udp; // a computed UDP checksum of 0 is sent as 0xffff
	__u16 stamp; // offset of the test payload; 0: no stamps
	__u16 generator; // this thread's generator id, host order
	// The template's payload bytes 2..18 as 16-bit words as they lie in the frame: the
	// one's complement sum of their complements (what RFC 1624 takes out).
	__u32 template_sum;
	__s64 clock_offset; // CLOCK_REALTIME - CLOCK_TAI, ns
	// A receiver can write into a live frame's page before it is recycled: one that takes
	// an 802.1Q tag off moves the addresses over it in place. Tagged frames get their
	// first bytes (addresses and tag) back from here each time.
	__u8 header[16];
	__u16 restore; // 16 or 0
	__u16 unused;
	// The source address number (k / span) that would be the destination's, from which the
	// addresses step over it; 0: the destination is not ahead of the base address.
	__u32 past_dst;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct live_vary);
} live_vary SEC(".maps");

// The next flow, per CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} live_next SEC(".maps");

// The stamps' state (one thread uses an object): the next sequence number, and the last
// clock reading with the sequence number it was taken at. Reading the clock costs about as
// much as the rest of a frame's work, so it is read every CLOCK_EVERY frames and at the
// start of each run (user space bumps live_run before each); the frames in between carry
// the last reading. So a stamp is up to CLOCK_EVERY - 1 frames early (about 2 us at full
// rate), never late: stepping on at a measured rate would stamp frames after a pause
// between batches in the future.
#define CLOCK_EVERY 16

struct live_stamps {
	__u64 seq;
	__u64 clock_seq;
	__u64 clock_ns;
	__u32 run;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct live_stamps);
} live_stamps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} live_run SEC(".maps");

// The send time of frame `seq` (see live_stamps).
static __always_inline __u64 send_time(struct live_stamps *st, __u32 run, __u64 seq)
{
	if (run != st->run || seq - st->clock_seq >= CLOCK_EVERY) {
		st->run = run;
		st->clock_seq = seq;
		st->clock_ns = bpf_ktime_get_tai_ns();
	}
	return st->clock_ns;
}

// One's complement: the checksum `check` (as it lies in the frame) after the 16-bit words
// `from` became `to`, all in frame byte order (RFC 1624, eqn. 3).
static __always_inline __u16 csum_update(__u16 check, __u32 from, __u32 to)
{
	__u32 sum = (__u16)~check;

	sum += (__u16)~(from >> 16) + (__u16)~(from & 0xffff);
	sum += (to >> 16) + (to & 0xffff);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

SEC("xdp")
int xdp_live_vary(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct live_vary *c = bpf_map_lookup_elem(&live_vary, &zero);
	__u16 check;

	if (!c)
		return XDP_TX;
	if (c->restore) {
		if (data + sizeof(c->header) > end)
			return XDP_TX;
		__builtin_memcpy(data, c->header, sizeof(c->header));
	}
	check = c->check0;
	if (c->flows > 1 && c->span) {
		__u32 *next = bpf_map_lookup_elem(&live_next, &zero);
		__u32 k, a, addr_from, addr_to, ports_from, ports_to;
		__u16 ip_check;
		__u8 *ip, *l4;

		if (!next)
			return XDP_TX;
		k = *next;
		*next = k + 1 >= c->flows ? 0 : k + 1;
		ip = (__u8 *)data + (c->l3 & 0x3f);
		l4 = ip + 20;
		if ((void *)(l4 + 20) > end)
			return XDP_TX;
		addr_from = bpf_htonl(c->base_addr);
		a = k / c->span;
		if (c->past_dst && a >= c->past_dst)
			a += 1;
		addr_to = bpf_htonl(c->base_addr + a);
		// The source port: the first 16-bit word of the TCP/UDP header.
		ports_from = bpf_htons(c->base_port);
		ports_to = bpf_htons((__u16)(c->base_port + k % c->span));
		__builtin_memcpy(ip + 12, &addr_to, 4);
		ip_check = csum_update(c->ip_check0, addr_from, addr_to);
		__builtin_memcpy(ip + 10, &ip_check, 2);
		__builtin_memcpy(l4, &ports_to, 2);
		check = csum_update(check, addr_from, addr_to);
		check = csum_update(check, ports_from, ports_to);
	}
	if (c->stamp) {
		struct live_stamps *st = bpf_map_lookup_elem(&live_stamps, &zero);
		__u32 *run = bpf_map_lookup_elem(&live_run, &zero);
		__u8 *p = (__u8 *)data + (c->stamp & 0x3fff);
		__u64 seq, ts, words[2];
		__u32 sum;

		if (!st || !run || (void *)(p + 18) > end)
			return XDP_TX;
		seq = st->seq++;
		ts = send_time(st, *run, seq) + c->clock_offset;
		// Payload bytes 2..18: generator id, sequence number (big-endian) and the low 48
		// bits of the send time (big-endian), as crates/packet/src/template.rs lays them out.
		words[0] = __builtin_bswap64((__u64)c->generator << 48 | seq >> 16);
		words[1] = __builtin_bswap64(seq << 48 | (ts & 0xffffffffffffULL));
		__builtin_memcpy(p + 2, words, 16);
		// The checksum: the template's words out, these in (RFC 1624 eqn. 3).
		sum = (__u16)~check;
		sum += c->template_sum;
		sum += (__u32)(words[0] & 0xffff) + (__u32)(words[0] >> 16 & 0xffff) +
		       (__u32)(words[0] >> 32 & 0xffff) + (__u32)(words[0] >> 48);
		sum += (__u32)(words[1] & 0xffff) + (__u32)(words[1] >> 16 & 0xffff) +
		       (__u32)(words[1] >> 32 & 0xffff) + (__u32)(words[1] >> 48);
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		check = (__u16)~sum;
	}
	// A UDP template without a checksum stays without one.
	if (c->check && !(c->udp && c->check0 == 0)) {
		__u8 *at = (__u8 *)data + (c->check & 0x3fff);

		if (c->udp && check == 0)
			check = 0xffff;
		if ((void *)(at + 2) > end)
			return XDP_TX;
		__builtin_memcpy(at, &check, 2);
	}
	return XDP_TX;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
