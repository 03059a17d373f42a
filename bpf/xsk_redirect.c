// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
// Steers each packet to the AF_XDP socket registered for its receive queue, and lets it go
// on to the kernel stack when no socket is there (so an idle queue keeps working).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

// xdp.frags: loaded with multi-buffer support, so an interface whose MTU is larger than a
// page (9000 bytes) takes it in native mode. A packet of several buffers reaches only a
// socket bound for them; others drop it and count it (rx_dropped).
SEC("xdp.frags")
int xsk_redirect(struct xdp_md *ctx)
{
	// The flags argument is the action when the map has no entry for the queue (Linux 5.3+).
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
