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
//
// Several receiving threads (capture --cpus) each own some of the queues: a ring buffer has
// one consumer, so each thread gets a ring of its own (SPILL_RINGS of them, `spill` and
// `spill1`...; user space sizes those it uses and leaves the rest a page), and each queue's
// `level` says which ring its packets spill to.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define MAX_QUEUES 256
// Room kept in the fill and RX rings: a NAPI poll's worth, and a margin for skb mode, where
// two CPUs can run this program for one queue at once and these counts can race.
#define LOW_WATER 128
// Spill rings: at most this many receiving threads spill.
#define SPILL_RINGS 16

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
	// The spill ring of this queue's thread (set once, before rx_size).
	__u64 ring;
	__u64 user_pad[5];
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

// Sized by user space before load: ring 0, then the rings of threads 1 to SPILL_RINGS - 1.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} spill SEC(".maps");

#define SPILL_RING(n)                                  \
	struct {                                       \
		__uint(type, BPF_MAP_TYPE_RINGBUF);    \
		__uint(max_entries, 1 << 12);          \
	} spill##n SEC(".maps")

SPILL_RING(1);
SPILL_RING(2);
SPILL_RING(3);
SPILL_RING(4);
SPILL_RING(5);
SPILL_RING(6);
SPILL_RING(7);
SPILL_RING(8);
SPILL_RING(9);
SPILL_RING(10);
SPILL_RING(11);
SPILL_RING(12);
SPILL_RING(13);
SPILL_RING(14);
SPILL_RING(15);

// A record of `size` bytes (a constant at each call) in ring `ring`: each map must be named
// where it is used, so one branch a ring.
static __always_inline void *reserve(__u64 ring, const __u32 size)
{
	switch (ring) {
	case 1: return bpf_ringbuf_reserve(&spill1, size, 0);
	case 2: return bpf_ringbuf_reserve(&spill2, size, 0);
	case 3: return bpf_ringbuf_reserve(&spill3, size, 0);
	case 4: return bpf_ringbuf_reserve(&spill4, size, 0);
	case 5: return bpf_ringbuf_reserve(&spill5, size, 0);
	case 6: return bpf_ringbuf_reserve(&spill6, size, 0);
	case 7: return bpf_ringbuf_reserve(&spill7, size, 0);
	case 8: return bpf_ringbuf_reserve(&spill8, size, 0);
	case 9: return bpf_ringbuf_reserve(&spill9, size, 0);
	case 10: return bpf_ringbuf_reserve(&spill10, size, 0);
	case 11: return bpf_ringbuf_reserve(&spill11, size, 0);
	case 12: return bpf_ringbuf_reserve(&spill12, size, 0);
	case 13: return bpf_ringbuf_reserve(&spill13, size, 0);
	case 14: return bpf_ringbuf_reserve(&spill14, size, 0);
	case 15: return bpf_ringbuf_reserve(&spill15, size, 0);
	default: return bpf_ringbuf_reserve(&spill, size, 0);
	}
}

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
	struct spill_head *head = reserve(lv->ring, size);

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
	__u64 len = bpf_xdp_get_buff_len(ctx);

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

// xdp.frags: an interface with jumbo frames takes it in native mode; a packet spilled
// whole is read from all its buffers (bpf_xdp_load_bytes), and one larger than the largest
// record is counted lost (spill_full).
SEC("xdp.frags")
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
