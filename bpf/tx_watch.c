// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
// Counts the frames the kernel failed to send out of one interface after it redirected them
// there itself, from the XDP of that same interface: how the kernel engine's live frames
// leave (XDP_TX in a live run is a redirect back to the run's interface). The sender is told
// nothing of these failures; a veth whose peer takes no XDP frames refuses every one.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "kernel_net.h"

// The interface watched, in the namespace with this cookie. Set before attaching.
struct watch_config {
	__u64 netns_cookie;
	__u32 ifindex;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct watch_config);
} watch_config SEC(".maps");

// Per CPU: frames the device refused with an error (a veth without NAPI on its peer: ENXIO),
// frames left over from a partial send (the device's queue was full), frames whose redirect
// failed before they were queued (the interface down, the frame over its MTU), and the last
// error given (a negative errno).
struct watch_counts {
	__u64 refused;
	__u64 queue_full;
	__u64 not_queued;
	__s64 last_err;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct watch_counts);
} watch_counts SEC(".maps");

static __always_inline int watched(const struct net_device *dev, const struct watch_config *c)
{
	return dev && dev->ifindex == (int)c->ifindex && dev->nd_net.net->net_cookie == c->netns_cookie;
}

// A device's bulk queue was flushed: `drops` of its frames were not sent. Only frames that
// came in and went out on the watched interface count.
SEC("tp_btf/xdp_devmap_xmit")
int watch_devmap_xmit(__u64 *ctx)
{
	const struct net_device *from = (void *)ctx[0], *to = (void *)ctx[1];
	int drops = (int)ctx[3], err = (int)ctx[4];
	__u32 zero = 0;
	struct watch_config *config;
	struct watch_counts *counts;

	if (drops <= 0)
		return 0;
	config = bpf_map_lookup_elem(&watch_config, &zero);
	if (!config || !watched(from, config) || !watched(to, config))
		return 0;
	counts = bpf_map_lookup_elem(&watch_counts, &zero);
	if (!counts)
		return 0;
	if (err < 0) {
		counts->refused += drops;
		counts->last_err = err;
	} else {
		counts->queue_full += drops;
	}
	return 0;
}

// A redirect to an interface by its index (not through a map: BPF_MAP_TYPE_UNSPEC, as XDP_TX
// in a live run is) failed before the frame was queued.
SEC("tp_btf/xdp_redirect_err")
int watch_redirect_err(__u64 *ctx)
{
	const struct net_device *dev = (void *)ctx[0];
	int err = (int)ctx[3];
	__u32 map_type = (__u32)ctx[4], index = (__u32)ctx[6], zero = 0;
	struct watch_config *config;
	struct watch_counts *counts;

	if (map_type != BPF_MAP_TYPE_UNSPEC)
		return 0;
	config = bpf_map_lookup_elem(&watch_config, &zero);
	if (!config || index != config->ifindex || !watched(dev, config))
		return 0;
	counts = bpf_map_lookup_elem(&watch_counts, &zero);
	if (!counts)
		return 0;
	counts->not_queued += 1;
	counts->last_err = err;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
