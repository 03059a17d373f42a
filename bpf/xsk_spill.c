// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
// The redirect program with a spill ring, for receivers that must lose nothing (capture).
//
// A receiver rides out a stall (the hypervisor or another thread holding its CPU) only with
// frames waiting in its fill ring, and the kernel takes fill frames in order: a fill ring
// deep enough for a 10 ms stall makes every copy land in a frame untouched for that long, a
// cache and TLB miss on the CPU doing the copy. Here the fill ring stays shallow (hot), and
// when user space falls behind -- the fill ring nearly empty or the RX ring nearly full, by
// counts it shares with us -- packets go to a BPF ring buffer instead: written in order, so
// it costs the same however deep it is. Each spilled record says how many packets of its
// queue went to the socket before it, so user space puts the two streams back in order.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define MAX_QUEUES 256
// Room kept in the fill and RX rings: a NAPI poll's worth, and a margin for skb mode, where
// two CPUs can run this program for one queue at once and these counts can race.
#define LOW_WATER 128

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

// One per queue, two cache lines: user space writes the first as it goes, this program the
// second (user space sets its rx_size once, before the socket is registered), so neither
// side's writes evict a line the other one reads for each packet.
struct level {
	// Frames ever put in the fill ring.
	__u64 fill_given;
	// RX descriptors ever taken, plus the redirects the kernel dropped.
	__u64 rx_done;
	__u64 user_pad[6];
	// RX ring entries; 0 until user space starts the counts (no spilling, no counting).
	__u64 rx_size;
	// Packets redirected to the queue's socket (the kernel may still drop some: it counts
	// those in the socket's XDP_STATISTICS).
	__u64 redirected;
	// Packets written to the spill ring, and those it had no room for.
	__u64 spilled;
	__u64 spill_full;
	// The user counts as last read (refreshed only when they say there is no room).
	__u64 seen_fill_given;
	__u64 seen_rx_done;
	__u64 prog_pad[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct level);
} levels SEC(".maps");

// Sized by user space before load.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} spill SEC(".maps");

struct spill_head {
	// Packets of this queue redirected to the socket before this one.
	__u64 before;
	__u32 len;
	__u32 queue;
};

static __always_inline int has_room(struct level *lv)
{
	__u64 r = lv->redirected;

	return lv->seen_fill_given - r > LOW_WATER && r - lv->seen_rx_done + LOW_WATER < lv->rx_size;
}

// Copies the packet into a record of `size` bytes (a constant at each call, as the verifier
// needs); returns XDP_DROP, the packet being in the ring, or counts it lost.
static __always_inline int spill_into(struct xdp_md *ctx, struct level *lv, __u32 queue,
				      __u64 len, const __u32 size)
{
	struct spill_head *head = bpf_ringbuf_reserve(&spill, size, 0);

	if (!head) {
		lv->spill_full++;
		return XDP_DROP;
	}
	head->before = lv->redirected;
	head->len = len;
	head->queue = queue;
	// The caller's size test is the bound the verifier needs here, on this register: the
	// barriers keep the compiler from folding the tests into one it cannot follow.
	asm volatile("" : "+r"(len));
	if (len > size - sizeof(*head))
		goto lost;
	asm volatile("" : "+r"(len));
	if (len < 14)
		goto lost;
	if (bpf_xdp_load_bytes(ctx, 0, (void *)(head + 1), len))
		goto lost;
	bpf_ringbuf_submit(head, 0);
	lv->spilled++;
	return XDP_DROP;
lost:
	bpf_ringbuf_discard(head, 0);
	lv->spill_full++;
	return XDP_DROP;
}

static __always_inline int spill_packet(struct xdp_md *ctx, struct level *lv, __u32 queue)
{
	__u64 len = ctx->data_end - ctx->data;

	// Size classes: a record needs a size the verifier knows.
	if (len <= 128 - sizeof(struct spill_head))
		return spill_into(ctx, lv, queue, len, 128);
	if (len <= 256 - sizeof(struct spill_head))
		return spill_into(ctx, lv, queue, len, 256);
	if (len <= 512 - sizeof(struct spill_head))
		return spill_into(ctx, lv, queue, len, 512);
	if (len <= 1024 - sizeof(struct spill_head))
		return spill_into(ctx, lv, queue, len, 1024);
	if (len <= 2048 - sizeof(struct spill_head))
		return spill_into(ctx, lv, queue, len, 2048);
	return spill_into(ctx, lv, queue, len, 4096);
}

SEC("xdp")
int xsk_spill(struct xdp_md *ctx)
{
	__u32 queue = ctx->rx_queue_index;
	struct level *lv = bpf_map_lookup_elem(&levels, &queue);

	if (!lv || !lv->rx_size)
		return bpf_redirect_map(&xsks, queue, XDP_PASS);
	if (!has_room(lv)) {
		lv->seen_fill_given = *(volatile __u64 *)&lv->fill_given;
		lv->seen_rx_done = *(volatile __u64 *)&lv->rx_done;
		if (!has_room(lv))
			return spill_packet(ctx, lv, queue);
	}
	// Counted only when a socket is registered for the queue: what user space can receive.
	int action = bpf_redirect_map(&xsks, queue, XDP_PASS);

	if (action == XDP_REDIRECT)
		lv->redirected++;
	return action;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
