/* A libpcap program of the kind people write: sends every record of a capture file out of a
 * device with pcap_inject, and says which failed (pcap_geterr). Built against the system's
 * libpcap by tests/pcap_run.rs, run under `wirespeed pcap-run` with an xdp: device.
 *
 * usage: inject DEVICE FILE    exit 0: all sent; 1: a set-up call failed; 2: a send failed
 */
#include <pcap/pcap.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	char errbuf[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *hdr;
	const u_char *data;
	pcap_t *in, *out;
	long sent = 0, failed = 0;
	int r;

	if (argc != 3) {
		fprintf(stderr, "usage: inject DEVICE FILE\n");
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
