/* Calls on one handle from two threads and from a signal handler, as libpcap takes them.
 * Built against the system's libpcap by tests/pcap_run.rs, run under `wirespeed pcap-run`
 * with an xdp: device.
 *
 * usage: threads DEVICE COUNT   prints on stdout:
 *        empty I S              pcap_inject's and pcap_sendpacket's answers for 0 bytes
 *        sent N failed F loop R a second thread sends COUNT frames (EtherType 0x88b5, a
 *                               32-bit sequence number, 60 bytes) with pcap_inject while
 *                               this one waits in pcap_loop on the same handle, then breaks
 *                               that loop
 *        then says "ready" on stderr and reads what arrives:
 *        count-break R then D   pcap_loop(p, 3, ...) whose callback calls pcap_breakloop at
 *                               the third packet, then pcap_dispatch(p, 1, ...)
 *        filtered-in-callback D pcap_dispatch(p, -1, ...) whose callback sets a filter that
 *                               nothing passes at the first packet: how many it handed over
 *        threads -c DEVICE      sends frames until a SIGALRM handler (every millisecond)
 *                               closes the handle and exits 0, saying "closed"
 */
#include <pcap/pcap.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static pcap_t *p;
static long to_send, sent, failed;
static int seen;

static void frame(u_char *f, unsigned long seq)
{
	memset(f, 0, 60);
	memset(f, 0xff, 6);
	memcpy(f + 6, "\x02\x00\x00\x00\x00\x09", 6);
	f[12] = 0x88;
	f[13] = 0xb5;
	f[14] = seq >> 24;
	f[15] = seq >> 16;
	f[16] = seq >> 8;
	f[17] = seq;
}

static void *sender(void *arg)
{
	u_char f[60];
	long i;

	(void)arg;
	/* Let the loop start waiting first. */
	usleep(100 * 1000);
	for (i = 0; i < to_send; i++) {
		frame(f, i);
		if (pcap_inject(p, f, sizeof(f)) == (int)sizeof(f)) {
			sent++;
		} else {
			fprintf(stderr, "frame %ld: %s\n", i, pcap_geterr(p));
			failed++;
		}
	}
	pcap_breakloop(p);
	return NULL;
}

static void ignore(u_char *user, const struct pcap_pkthdr *h, const u_char *bytes)
{
	(void)user;
	(void)h;
	(void)bytes;
}

static void break_at_third(u_char *user, const struct pcap_pkthdr *h, const u_char *bytes)
{
	(void)user;
	(void)h;
	(void)bytes;
	if (++seen == 3)
		pcap_breakloop(p);
}

static void filter_all_out(u_char *user, const struct pcap_pkthdr *h, const u_char *bytes)
{
	struct bpf_program nothing;

	(void)user;
	(void)h;
	(void)bytes;
	if (pcap_compile(p, &nothing, "ether proto 0x1234", 1, PCAP_NETMASK_UNKNOWN) == 0) {
		pcap_setfilter(p, &nothing);
		pcap_freecode(&nothing);
	}
}

static void on_alarm(int sig)
{
	(void)sig;
	pcap_close(p);
	if (write(1, "closed\n", 7) != 7)
		_exit(3);
	_exit(0);
}

static int close_from_handler(void)
{
	struct itimerval every = { { 0, 1000 }, { 0, 1000 } };
	u_char f[60];
	unsigned long i = 0;

	signal(SIGALRM, on_alarm);
	setitimer(ITIMER_REAL, &every, NULL);
	for (;;) {
		frame(f, i++);
		pcap_inject(p, f, sizeof(f));
	}
}

int main(int argc, char **argv)
{
	char errbuf[PCAP_ERRBUF_SIZE];
	const char *device;
	pthread_t thread;
	u_char empty[1] = { 0 };
	int r;

	if (argc == 3 && strcmp(argv[1], "-c") == 0) {
		device = argv[2];
	} else if (argc == 3) {
		device = argv[1];
		to_send = atol(argv[2]);
	} else {
		fprintf(stderr, "usage: threads DEVICE COUNT | threads -c DEVICE\n");
		return 1;
	}
	p = pcap_open_live(device, 65535, 0, 100, errbuf);
	if (p == NULL) {
		fprintf(stderr, "%s: %s\n", device, errbuf);
		return 1;
	}
	if (to_send == 0)
		return close_from_handler();

	printf("empty %d %d\n", pcap_inject(p, empty, 0), pcap_sendpacket(p, empty, 0));
	pthread_create(&thread, NULL, sender, NULL);
	r = pcap_loop(p, -1, ignore, NULL);
	pthread_join(thread, NULL);
	printf("sent %ld failed %ld loop %d\n", sent, failed, r);
	fflush(stdout);

	fprintf(stderr, "ready\n");
	r = pcap_loop(p, 3, break_at_third, NULL);
	printf("count-break %d then %d\n", r, pcap_dispatch(p, 1, ignore, NULL));
	printf("filtered-in-callback %d\n", pcap_dispatch(p, -1, filter_all_out, NULL));
	pcap_close(p);
	return 0;
}
