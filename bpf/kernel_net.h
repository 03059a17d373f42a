// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
// The kernel's own layouts, as far as our tracepoint programs read them (a device's index
// and its namespace's cookie); relocated against the kernel's BTF when loaded.
#ifndef WIRESPEED_KERNEL_NET_H
#define WIRESPEED_KERNEL_NET_H

#include <linux/types.h>

struct net {
	__u64 net_cookie;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

#endif
