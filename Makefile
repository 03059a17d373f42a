# wirespeed: make demo (see it run), make test (what CI runs), make bench (the full benchmark).
# Every target installs what it needs first (scripts/install-deps.sh: only what is missing).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
# rustup puts cargo in ~/.cargo/bin, which a fresh login or sudo may not have on PATH.
export PATH := $(HOME)/.cargo/bin:$(PATH):/usr/local/sbin:/usr/sbin:/sbin
CARGO ?= cargo
SCRIPTS := .ci/run scripts/install-deps.sh scripts/install-peers.sh scripts/demo.sh scripts/lib/netns.sh scripts/lib/measure.sh bench/run.sh bench/capture.sh bench/recv_defaults.sh bench/recv_spin.sh bench/many-core/pack.sh bench/many-core/scale.sh bench/many-core/profile-engine.sh

.PHONY: all help deps build demo test lint bench bench-peers bench-switch bench-openflow bench-capture bench-pcap bench-idle bench-scale bench-observe bench-zcopy bench-pipe bench-jumbo bench-tunnel bench-churn bench-churn-peers soak fuzz clean

all: build

help:
	@echo "make demo   build, then measure xdpdrop / rxdrop / l2fwd on a veth pair (root)"
	@echo "make test   lint, then the unit and integration tests (root: they make namespaces)"
	@echo "make bench  the full benchmark into bench/results/ and bench/README.md (root)"
	@echo "make bench-peers  wirespeed against testpmd, trafgen... into bench/RESULTS.md (root)"
	@echo "make bench-switch the switch against the Linux bridge, tc mirred, Open vSwitch (root)"
	@echo "make bench-tunnel the switch's VXLAN encap and decap against Open vSwitch's (KIND=gre: GRE's) (root)"
	@echo "make bench-churn  rule changes under traffic: precise revalidation against flushing the caches"
	@echo "make bench-churn-peers rule changes under real traffic against Open vSwitch (root; CHANGE=group: group changes; CHANGE=touch: changes to a flow of the traffic)"
	@echo "make bench-openflow OpenFlow flow setup, PACKET_IN round trip against Open vSwitch (root)"
	@echo "make bench-capture wirespeed capture against tcpdump -w and netsniff-ng (root)"
	@echo "make bench-pcap   tcpdump through pcap-run against tcpdump and wirespeed capture (root)"
	@echo "make bench-idle   CPU a receiver burns at 0.5 and 2 Mpps, against testpmd (root)"
	@echo "make bench-scale  xdpdrop, kernel engine, rxdrop, capture, switch on N = 1, 2, 4, 8 queues (root)"
	@echo "make bench-observe the switch with --metrics scraped and --ipfix exporting, against without (root)"
	@echo "make bench-zcopy  zero-copy TCP send and receive against socat (root)"
	@echo "make bench-pipe   pipe: ports against DPDK's memif, process to process"
	@echo "make bench-jumbo  9000-byte frames (multi-buffer) against testpmd (root)"
	@echo "make soak   30 minutes of gen -> switch -> recv, a port flapping, flows changing (root)"
	@echo "make fuzz   each fuzz target (fuzz/) for FUZZ_SECONDS (60), or FUZZ_RUNS inputs; nightly"
	@echo "make build  release build: target/release/wirespeed"
	@echo "make lint   cargo fmt --check, clippy -D warnings, cargo doc -D warnings, the fuzz targets compile, shell and Python syntax"
	@echo "make deps   install what is missing (clang, llvm, libbpf-dev, iproute2, ethtool, ...)"
	@echo "make clean  cargo clean"

deps:
	@scripts/install-deps.sh

build: deps
	$(CARGO) build --release

demo: deps
	scripts/demo.sh

lint: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	# A link to a private or renamed item is a warning rustdoc alone sees (about 45 s).
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --quiet
	# fuzz/ is a crate of its own (libFuzzer): checked here so a changed API cannot break a
	# target unseen; running them needs nightly (make fuzz).
	$(CARGO) check --manifest-path fuzz/Cargo.toml --bins
	for f in $(SCRIPTS); do bash -n "$$f"; done
	shellcheck -x -S warning $(SCRIPTS)
	for f in bench/*.py bench/many-core/*.py; do [ -e "$$f" ] || continue; python3 -c "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])" "$$f"; done

test:
	@if [ "$$(id -u)" -ne 0 ]; then \
	  echo "make test: the integration tests need root (CAP_NET_ADMIN, CAP_SYS_ADMIN for network namespaces and veths, CAP_BPF for XDP)." >&2; \
	  echo "make test: run it as root, e.g. sudo make test" >&2; \
	  exit 1; \
	fi
	@scripts/install-deps.sh
	$(MAKE) --no-print-directory lint
	# pcap-run's tests preload the library: cargo test builds the crate's tests, not it.
	$(CARGO) build -p wirespeed-pcap-shim
	$(CARGO) test --workspace

bench: deps
	bench/run.sh

bench-capture: deps
	bench/capture.sh

bench-pcap: deps
	BENCH=pcap bench/capture.sh

bench-idle: deps
	@scripts/install-peers.sh
	$(CARGO) build --release
	/usr/bin/python3 bench/idle.py

bench-scale: deps
	@scripts/install-peers.sh
	$(CARGO) build --release
	/usr/bin/python3 bench/scale.py

bench-observe: deps
	$(CARGO) build --release
	/usr/bin/python3 bench/observe.py

bench-peers: deps
	@scripts/install-peers.sh
	$(CARGO) build --release
	/usr/bin/python3 bench/peers.py

bench-switch: deps
	@scripts/install-peers.sh
	$(CARGO) build --release
	$(CARGO) build --release -p wirespeed-switch --example stages
	/usr/bin/python3 bench/switch_peers.py

bench-tunnel: deps
	@scripts/install-peers.sh
	$(CARGO) build --release
	$(CARGO) build --release -p wirespeed-switch --example stages
	/usr/bin/python3 bench/tunnel.py

bench-churn: deps
	$(CARGO) build --release -p wirespeed-switch --example rule_churn
	/usr/bin/python3 bench/rule_churn.py

bench-churn-peers: deps
	@scripts/install-peers.sh
	$(CARGO) build --release
	/usr/bin/python3 bench/churn_peers.py

bench-openflow: deps
	@scripts/install-peers.sh
	$(CARGO) build --release
	/usr/bin/python3 bench/openflow.py

bench-zcopy: deps
	@scripts/install-peers.sh
	$(CARGO) build --release
	/usr/bin/python3 bench/zcopy.py

bench-jumbo: deps
	@scripts/install-peers.sh
	$(CARGO) build --release
	/usr/bin/python3 bench/jumbo.py

bench-pipe: deps
	@scripts/install-peers.sh
	$(CARGO) build --release
	/usr/bin/python3 bench/pipe.py

soak: deps
	$(CARGO) build --release
	/usr/bin/python3 bench/soak.py

# A budget per target: FUZZ_SECONDS of time, or FUZZ_RUNS inputs (the campaign that took each
# target to 10^8: make fuzz FUZZ_SECONDS=0 FUZZ_RUNS=100000000; README.md, "Layout"). Each
# target starts from, and adds to, its corpus in fuzz/corpus/TARGET.
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= -1
FUZZ_TARGETS := frame_parse capture_file flow_text port_spec rewrite openflow_message tunnel_pop \
	packet_line bpf_filter test_frame openflow_tables

fuzz: deps
	@rustup toolchain list | grep -q '^nightly' || { \
	  echo "make fuzz: libFuzzer needs a nightly compiler: rustup toolchain install nightly" >&2; exit 1; }
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	for t in $(FUZZ_TARGETS); do \
	  $(CARGO) +nightly fuzz run -O "$$t" -- -max_total_time=$(FUZZ_SECONDS) -runs=$(FUZZ_RUNS) \
	    -rss_limit_mb=2048 -timeout=10 -print_final_stats=1; \
	done

clean:
	$(CARGO) clean
