/* The reading calls tcpdump does not make, as other libpcap programs make them: a handle set
 * up with pcap_create and pcap_set_*, pcap_next_ex in non-blocking mode (nothing waits: 0)
 * and then blocking until COUNT packets came, and a pcap_loop that another thread ends with
 * pcap_breakloop after asking pcap_stats. Built against the system's libpcap by
 * tests/pcap_run.rs, run under `wirespeed pcap-run` with an xdp: device.
 *
 * usage: reader DEVICE COUNT   says "ready" on stderr once open, then on stdout:
 *        unactivated N         pcap_next_ex's answer before pcap_activate
 *        compile N: TEXT       pcap_compile's answer before pcap_activate, and its error
 *        nonblock N            pcap_next_ex's answer with nothing waiting
 *        next N bytes B        packets read with pcap_next_ex and their captured bytes
 *        stats recv R drop D   pcap_stats, asked from the other thread
 *        loop N                pcap_loop's answer once broken
 */
#include <pcap/pcap.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static struct pcap_stat stats;
static int stats_status = -99;

static void *stopper(void *arg)
{
	pcap_t *p = arg;

	usleep(300 * 1000);
	stats_status = pcap_stats(p, &stats);
	pcap_breakloop(p);
	return NULL;
}

static void ignore(u_char *user, const struct pcap_pkthdr *h, const u_char *bytes)
{
	(void)user;
	(void)h;
	(void)bytes;
}

int main(int argc, char **argv)
{
	char errbuf[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *hdr;
	const u_char *data;
	long want, got = 0, bytes = 0;
	struct bpf_program early;
	pthread_t thread;
	pcap_t *p;
	int r;

	if (argc != 3) {
		fprintf(stderr, "usage: reader DEVICE COUNT\n");
		return 1;
	}
	want = atol(argv[2]);
	p = pcap_create(argv[1], errbuf);
	if (p == NULL) {
		fprintf(stderr, "%s: %s\n", argv[1], errbuf);
		return 1;
	}
	printf("unactivated %d\n", pcap_next_ex(p, &hdr, &data));
	r = pcap_compile(p, &early, "udp", 1, PCAP_NETMASK_UNKNOWN);
	printf("compile %d: %s\n", r, r == 0 ? "" : pcap_geterr(p));
	if (r == 0)
		pcap_freecode(&early);
	pcap_set_snaplen(p, 65535);
	pcap_set_timeout(p, 100);
	pcap_set_immediate_mode(p, 1);
	r = pcap_activate(p);
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", argv[1], pcap_geterr(p));
		return 1;
	}
	if (pcap_setnonblock(p, 1, errbuf) != 0 || pcap_getnonblock(p, errbuf) != 1) {
		fprintf(stderr, "setnonblock: %s\n", errbuf);
		return 1;
	}
	printf("nonblock %d\n", pcap_next_ex(p, &hdr, &data));
	pcap_setnonblock(p, 0, errbuf);
	fprintf(stderr, "ready\n");
	while (got < want) {
		r = pcap_next_ex(p, &hdr, &data);
		if (r < 0) {
			fprintf(stderr, "pcap_next_ex: %s\n", pcap_geterr(p));
			return 1;
		}
		if (r == 1) {
			got++;
			bytes += hdr->caplen;
		}
	}
	printf("next %ld bytes %ld\n", got, bytes);
	pthread_create(&thread, NULL, stopper, p);
	r = pcap_loop(p, -1, ignore, NULL);
	pthread_join(thread, NULL);
	printf("stats %d recv %u drop %u\n", stats_status, stats.ps_recv, stats.ps_drop);
	printf("loop %d\n", r);
	pcap_close(p);
	return 0;
}
