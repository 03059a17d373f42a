// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
// Drops every packet in the driver and counts it: the ceiling an AF_XDP receiver can approach
// on this interface (the AF_PACKET V4 paper's "XDP_DROP" row).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct drop_count {
	__u64 packets;
	__u64 bytes;
};

// Per-CPU so the counting costs no shared cache line; user space adds the CPUs up.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct drop_count);
} drops SEC(".maps");

// xdp.frags: an interface with jumbo frames takes it in native mode.
SEC("xdp.frags")
int xdp_drop(struct xdp_md *ctx)
{
	__u32 key = 0;
	struct drop_count *c = bpf_map_lookup_elem(&drops, &key);

	if (c) {
		c->packets++;
		// Every buffer of a packet larger than a page, not the first alone.
		c->bytes += bpf_xdp_get_buff_len(ctx);
	}
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
