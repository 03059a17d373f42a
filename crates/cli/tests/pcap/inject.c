/* A libpcap program of the kind people write: sends every record of a capture file out of a
 * device with pcap_inject, and says which failed (pcap_geterr); or, as a responder does,
 * sends each packet it reads straight back out from inside its pcap_loop callback. Built
 * against the system's libpcap by tests/pcap_run.rs, run under `wirespeed pcap-run` with an
 * xdp: device.
 *
 * usage: inject DEVICE FILE     exit 0: all sent; 1: a set-up call failed; 2: a send failed
 *        inject -e DEVICE COUNT reads COUNT packets, sending each back; exits as above
 */
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>

static pcap_t *echo_dev;
static long echoed, echo_failed;

static void echo(u_char *user, const struct pcap_pkthdr *h, const u_char *bytes)
{
	(void)user;
	if (pcap_inject(echo_dev, bytes, h->caplen) == (int)h->caplen) {
		echoed++;
	} else {
		fprintf(stderr, "echo: %s\n", pcap_geterr(echo_dev));
		echo_failed++;
	}
}

static int echo_main(const char *device, int count)
{
	char errbuf[PCAP_ERRBUF_SIZE];

	echo_dev = pcap_open_live(device, 65535, 0, 100, errbuf);
	if (echo_dev == NULL) {
		fprintf(stderr, "%s: %s\n", device, errbuf);
		return 1;
	}
	if (pcap_loop(echo_dev, count, echo, NULL) < 0) {
		fprintf(stderr, "pcap_loop: %s\n", pcap_geterr(echo_dev));
		return 1;
	}
	printf("echoed %ld failed %ld\n", echoed, echo_failed);
	pcap_close(echo_dev);
	return echo_failed ? 2 : 0;
}

int main(int argc, char **argv)
{
	char errbuf[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *hdr;
	const u_char *data;
	pcap_t *in, *out;
	long sent = 0, failed = 0;
	int r;

	if (argc == 4 && argv[1][0] == '-' && argv[1][1] == 'e')
		return echo_main(argv[2], atoi(argv[3]));
	if (argc != 3) {
		fprintf(stderr, "usage: inject DEVICE FILE | inject -e DEVICE COUNT\n");
		return 1;
	}
	/* An offline read: the real libpcap's, untouched by the shim. */
	in = pcap_open_offline(argv[2], errbuf);
	if (in == NULL) {
		fprintf(stderr, "%s: %s\n", argv[2], errbuf);
		return 1;
	}
	out = pcap_open_live(argv[1], 65535, 0, 100, errbuf);
	if (out == NULL) {
		fprintf(stderr, "%s: %s\n", argv[1], errbuf);
		return 1;
	}
	while ((r = pcap_next_ex(in, &hdr, &data)) == 1) {
		if (pcap_inject(out, data, hdr->caplen) == (int)hdr->caplen) {
			sent++;
		} else {
			fprintf(stderr, "record %ld: %s\n", sent + failed + 1, pcap_geterr(out));
			failed++;
		}
	}
	printf("sent %ld failed %ld\n", sent, failed);
	pcap_close(out);
	pcap_close(in);
	return failed ? 2 : 0;
}
