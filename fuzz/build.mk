# libFuzzer targets for every parser that reads outside input (included by
# the top Makefile, which defines BUILD, GEN, GEN_SRCS, COMMON_SRCS,
# COMMON_HDRS and, from cli/build.mk, CLI_LIB_SRCS and CLI_JANSSON_*).
#   make fuzz                   builds fuzz/fuzz_*.c and runs each target
#                               FUZZ_SECONDS (60) seconds from its seeds in
#                               fuzz/corpus/<target>/; fails on any crash,
#                               leak, UBSan report, timeout or broken property
#   make fuzz FUZZ_SECONDS=300  a longer run (the numbers in BENCHMARKS.md)
#   make fuzz-build             only builds
# Not part of `all` or `test`: .ci/run runs `make fuzz` briefly.
# Debian's clang, with the sanitizers fatal (UBSan aborts, so libFuzzer
# keeps the input). common/ and cli/ are compiled once into archives with
# coverage instrumentation; each target links only what it uses.

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_BUILD   := $(BUILD)/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS  := -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter \
                -g -O1 -fno-omit-frame-pointer -I. -I$(GEN) $(FUZZ_SAN)
FUZZ_LIBS    := $(CLI_JANSSON_LIBS) -lprotobuf-c -lcurl -lz -lunwind \
                -lsqlite3 -lnghttp2 -lpthread -lm

FUZZ_SRCS    := $(wildcard fuzz/fuzz_*.c)
FUZZ_TARGETS := $(patsubst fuzz/fuzz_%.c,%,$(FUZZ_SRCS))
FUZZ_BINS    := $(addprefix $(FUZZ_BUILD)/,$(FUZZ_TARGETS))

# spanprof serve: its parsers and its gRPC connection (not its listeners).
FUZZ_LIB_SRCS := $(COMMON_SRCS) $(CLI_LIB_SRCS) cli/serve/otlp_json_decode.c \
                 cli/serve/otlp_ingest.c cli/serve/store.c cli/serve/json_out.c \
                 cli/serve/serve_grpc.c cli/serve/otlp_reply.c cli/serve/request_store.c \
                 cli/serve/attrs_json.c cli/serve/attr_keys.c cli/serve/part_map.c
FUZZ_SRC_OBJS := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(FUZZ_LIB_SRCS))
FUZZ_GEN_OBJS := $(patsubst $(GEN)/%.c,$(FUZZ_BUILD)/obj/gen/%.o,$(GEN_SRCS))
FUZZ_OBJS     := $(FUZZ_SRC_OBJS) $(FUZZ_GEN_OBJS)

.PHONY: fuzz fuzz-build

$(FUZZ_SRC_OBJS): $(FUZZ_BUILD)/obj/%.o: %.c $(COMMON_HDRS) cli/spanprof.h $(wildcard cli/serve/*.h) $(GEN)/.stamp
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(CLI_JANSSON_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_GEN_OBJS): $(FUZZ_BUILD)/obj/gen/%.o: $(GEN)/%.c $(GEN)/.stamp
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Wno-error -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_BUILD)/libspanprof-fuzz.a: $(FUZZ_OBJS)
	rm -f $@
	ar rcs $@ $^

# fuzz/fuzz_*.h are the targets' own helpers.
$(FUZZ_BINS): $(FUZZ_BUILD)/%: fuzz/fuzz_%.c $(wildcard fuzz/*.h) $(FUZZ_BUILD)/libspanprof-fuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(CLI_JANSSON_CFLAGS) -fsanitize=fuzzer -o $@ $< \
	    $(FUZZ_BUILD)/libspanprof-fuzz.a $(FUZZ_LIBS)

fuzz-build: $(FUZZ_BINS)

fuzz: fuzz-build
	fuzz/run $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)
