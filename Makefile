# Seam: `make demo` to see it work, `make test` to run the tests. Each does its own setup.

CARGO  ?= cargo
GUESTS := -p mock-provider -p subagent-tool -p faulty-provider
SEAM   := target/debug/seam
DEMO   := examples/seam.toml

.DEFAULT_GOAL := build
.PHONY: setup guests build demo test lint

# The guest components are built for WASI preview 2.
setup:
	rustup target add wasm32-wasip2

# The three guest components, into target/guests/wasm32-wasip2/release/*.wasm.
guests: setup
	$(CARGO) build --release --target wasm32-wasip2 --target-dir target/guests $(GUESTS)

# The guests and the `seam` CLI (target/debug/seam).
build: guests
	$(CARGO) build -p seam-host

demo: build
	$(SEAM) check $(DEMO)
	$(SEAM) delegate $(DEMO) --provider researcher --prompt "Find out how Seam isolates plugins" --events
	$(SEAM) call $(DEMO) --tool review --args '{"description":"review the plan","prompt":"Review the plan to load every provider as a component"}'

test: setup guests
	$(CARGO) test

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings
