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

// Many flows from one template (`gen --engine kernel --flows N`): frame k of a CPU gets
// source port base_port + k % span and source address base_addr + k / span, k cycling through
// 0..flows, the way the socket engine numbers flows. The kernel initialises a live frame's
// page once and recycles it with whatever the program wrote, so every field is written
// whole and both checksums are computed from the template's, never from the page.
struct live_flows {
	__u32 flows;
	__u32 span;
	__u32 base_addr; // host order
	__u16 base_port; // host order
	__u16 l3; // offset of the IPv4 header (20 bytes, no options)
	__u16 l4_check; // offset of the TCP or UDP checksum in its header
	__u16 ip_check0; // the template's checksums, as they lie in the frame
	__u16 l4_check0;
	__u16 udp; // a computed UDP checksum of 0 is sent as 0xffff
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct live_flows);
} live_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} live_next SEC(".maps");

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
int xdp_live_flows(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0, k, addr_from, addr_to, ports_from, ports_to;
	struct live_flows *c = bpf_map_lookup_elem(&live_flows, &zero);
	__u32 *next = bpf_map_lookup_elem(&live_next, &zero);
	__u8 *ip, *l4;
	__u16 check;

	if (!c || !next || !c->span || !c->flows)
		return XDP_TX;
	k = *next;
	*next = k + 1 >= c->flows ? 0 : k + 1;
	ip = (__u8 *)data + (c->l3 & 0x3f);
	l4 = ip + 20;
	if ((void *)(l4 + 20) > end)
		return XDP_TX;
	addr_from = bpf_htonl(c->base_addr);
	addr_to = bpf_htonl(c->base_addr + k / c->span);
	// The source port: the first 16-bit word of the TCP/UDP header.
	ports_from = bpf_htons(c->base_port);
	ports_to = bpf_htons((__u16)(c->base_port + k % c->span));
	__builtin_memcpy(ip + 12, &addr_to, 4);
	check = csum_update(c->ip_check0, addr_from, addr_to);
	__builtin_memcpy(ip + 10, &check, 2);
	__builtin_memcpy(l4, &ports_to, 2);
	check = c->l4_check0;
	if (!(c->udp && check == 0)) { // UDP without a checksum stays without
		check = csum_update(check, addr_from, addr_to);
		check = csum_update(check, ports_from, ports_to);
		if (c->udp && check == 0)
			check = 0xffff;
	}
	if (c->l4_check == 6)
		__builtin_memcpy(l4 + 6, &check, 2);
	else
		__builtin_memcpy(l4 + 16, &check, 2);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
