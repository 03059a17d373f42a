// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
// The kernel transmit engine: run by BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES, every
// frame it returns XDP_TX for leaves through the interface named in the run's context, at
// XDP speed and with no socket in the way (the way xdp-trafficgen does it).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_live_tx(struct xdp_md *ctx)
{
	return XDP_TX;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
