# Benchmarks (included by the top Makefile). Not part of `all` or `test`:
# `make bench` builds the modules and the tools below, runs bench/run (about
# 35 minutes: nginx, then bench/run_apache for Apache httpd's event MPM and,
# shorter, prefork and worker, then bench/amplification; it prints its
# estimate first; BENCH_DURATION / BENCH_ROUNDS shorten it, BENCH_APACHE=0
# and BENCH_AMPLIFICATION=0 leave those out) and rewrites BENCHMARKS.md,
# then bench/keep, bench/cli and bench/serve (below: about 8 minutes more),
# then bench/report.pl once more, so that the issue-29 targets table holds
# this run's bench/serve numbers. `make bench-tools`
# only builds. `make bench-cli` runs bench/cli alone (a few minutes): the
# spanprof CLI on 100k to 1M spans, a section of BENCHMARKS.md of its own.
# bench/callgrind (run by hand) gives repeatable instruction counts per
# request under valgrind.

BENCH_BUILD  := $(BUILD)/bench
# Like the unit tests, against common/ and the generated protobuf code, but
# optimised as the module is and without sanitizers.
BENCH_CFLAGS := $(CORE_CFLAGS) -O2 -g
# alloc_cost (below) too, as bench/run runs it: a rule's prerequisites are
# read where the rule is, so every tool is named here, before bench-tools.
BENCH_TOOLS  := $(BENCH_BUILD)/sample_cost $(BENCH_BUILD)/encode_bench \
                $(BENCH_BUILD)/keep_cost $(BENCH_BUILD)/receiver \
                $(BENCH_BUILD)/alloc_cost $(BENCH_BUILD)/clock_cost

.PHONY: bench bench-tools bench-cli bench-keep bench-serve

$(BENCH_BUILD)/sample_cost $(BENCH_BUILD)/encode_bench $(BENCH_BUILD)/keep_cost $(BENCH_BUILD)/clock_cost: $(BENCH_BUILD)/%: bench/%.c $(COMMON_SRCS) $(COMMON_HDRS) $(GEN)/.stamp
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -rdynamic -o $@ $< $(COMMON_SRCS) $(GEN_SRCS) $(CORE_LIBS)

$(BENCH_BUILD)/receiver: bench/receiver.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter -o $@ $<

# spanprof serve's store and ingest, without HTTP (bench/serve).
SERVE_BENCH_SRCS := cli/serve/store.c cli/serve/otlp_ingest.c \
                    cli/serve/otlp_json_decode.c cli/serve/json_out.c \
                    cli/serve/flame_json.c cli/serve/attrs_json.c \
                    cli/serve/attr_keys.c cli/serve/part_map.c cli/util.c
$(BENCH_BUILD)/serve_bench: bench/serve_bench.c $(SERVE_BENCH_SRCS) $(wildcard cli/serve/*.h) $(CLI_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CLI_CFLAGS) -O2 -o $@ $< $(SERVE_BENCH_SRCS) $(CLI_COMMON) \
	    $(CLI_GEN) $(CLI_LIBS) $(SERVE_LIBS)

bench-tools: $(BENCH_TOOLS) $(BENCH_BUILD)/serve_bench

bench:
	BENCH_FROM_MAKE=1 bench/run
	$(MAKE) bench-time-split
	$(MAKE) bench-keep
	$(MAKE) bench-cli
	$(MAKE) bench-serve
	perl bench/report.pl build/bench/run "$${BENCH_OUT:-BENCHMARKS.md}" --quiet

# Where a traced request's time goes, sampled on the server's CPU
# (bench/time_split, on bench/run's configurations), for both servers:
# tracing against none (C - A), profiling against tracing (D - C) and, in
# nginx, OTLP/gRPC against none (G - A), issue 29's targets. A
# machine where perf cannot sample a CPU (perf_event_paranoid, a container)
# gets a note in BENCHMARKS.md instead.
bench-time-split:
	@for s in apache nginx; do \
	    rm -f build/bench/time_split-$$s.failed; \
	    case $$s in nginx) cf="A C D G";; *) cf="A C D";; esac; \
	    TIME_SPLIT_CONFIGS="$$cf" bench/time_split $$s r200 3 > /dev/null 2> build/bench/time_split-$$s.log \
	    || { echo "bench/time_split $$s failed: $$(tail -1 build/bench/time_split-$$s.log)"; \
	         tail -1 build/bench/time_split-$$s.log > build/bench/time_split-$$s.failed; }; \
	done

# spanprof serve (bench/serve): ingest rate, query times and database size
# with SERVE_BENCH_SPANS (default 10,000,000) spans stored.
bench-serve: $(BENCH_BUILD)/serve_bench
	bench/serve

# The keep rules (otel_profiling_keep) alone, about a minute: their cost at
# a request's end and the profile size with and without them (bench/keep).
bench-keep:
	bench/keep

bench-cli: $(CLI_BIN)
	bench/cli

# The allocation hooks' cost per call (bench/alloc_cost.c), without
# sanitizers; its loop is a shared object so that the hooks patch its GOT,
# and the hooks another, loaded as the modules are.
$(BENCH_BUILD)/liballoc_cost_loop.so: bench/alloc_cost_loop.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -fPIC -shared -Wl,-z,relro -Wl,-z,now -o $@ $<

# The hooks as a dlopen()ed object, as in the modules (TLSDESC).
$(BENCH_BUILD)/liballoc_cost_hooks.so: $(ALLOC_SRCS) $(ALLOC_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -shared -Wl,-z,relro -Wl,-z,now -o $@ \
	    $(ALLOC_SRCS) -lunwind -lpthread

$(BENCH_BUILD)/alloc_cost: bench/alloc_cost.c $(ALLOC_HDRS) $(BENCH_BUILD)/liballoc_cost_loop.so $(BENCH_BUILD)/liballoc_cost_hooks.so
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $<

