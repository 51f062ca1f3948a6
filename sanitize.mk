# Sanitized copies of both modules and `make test-sanitize` (included by the
# top Makefile, which defines BUILD, CC, CORE_CFLAGS, CORE_LIBS, GEN,
# COMMON_SRCS, COMMON_HDRS, GEN_SRCS, NGX_SRC, NGX_CONF_FLAGS; and, through
# apache_module/build.mk, AP_SRCS, AP_HDRS, AP_CPPFLAGS).
#
#   make sanitize       -> build/asan/nginx/ngx_http_spanprof_module.so
#                          build/asan/apache/mod_spanprof.so
#   make test-sanitize  -> the propagation, export-failure and profiling
#                          tests against Debian's real nginx and apache2 with
#                          those modules and Debian's libasan/libubsan
#                          preloaded; fails on any sanitizer report.
#
# The normal build (build/nginx, build/apache) is not touched: the nginx copy
# is configured in its own source tree, the Apache objects go to their own
# directory.

SAN_BUILD      := $(BUILD)/asan
SAN_FLAGS      := -fsanitize=address,undefined -fno-omit-frame-pointer \
                  -fno-sanitize-recover=undefined
SAN_REPORTS    := $(SAN_BUILD)/reports

# The runtimes the servers get in LD_PRELOAD: Debian's nginx and apache2 are
# not linked with libasan, and ASan must come first in the library list (it
# refuses to start when a dlopen()ed module brings it in).
SAN_LIBASAN    := $(realpath $(shell $(CC) -print-file-name=libasan.so))
SAN_LIBUBSAN   := $(realpath $(shell $(CC) -print-file-name=libubsan.so))

# --- nginx: Debian's configure flags, the sanitizers in cc-opt and ld-opt ---
SAN_NGX_BUILD  := $(SAN_BUILD)/nginx
SAN_NGX_TREE   := $(SAN_BUILD)/nginx-src
SAN_NGX_MODULE := $(SAN_NGX_BUILD)/ngx_http_spanprof_module.so

# configure links and runs its feature probes with these flags: LeakSanitizer
# would fail a probe that does not free (and so turn a feature off).
$(SAN_NGX_BUILD)/Makefile: config $(COMMON_SRCS) $(wildcard ngx_module/*.c) $(addprefix proto/,$(PROTOS)) sanitize.mk
	rm -rf $(SAN_NGX_TREE) && mkdir -p $(SAN_BUILD) && cp -r $(NGX_SRC) $(SAN_NGX_TREE)
	cd $(SAN_NGX_TREE) && ASAN_OPTIONS=detect_leaks=0 ./configure $(NGX_CONF_FLAGS) \
	    --with-cc-opt='-g -O1 -fPIC $(SAN_FLAGS)' \
	    --with-ld-opt='-Wl,-z,relro -Wl,-z,now -fPIC $(SAN_FLAGS)' \
	    --add-dynamic-module=$(CURDIR) \
	    --builddir=$(abspath $(SAN_NGX_BUILD)) >/dev/null

.PHONY: sanitize sanitize-nginx sanitize-apache test-sanitize

sanitize-nginx: $(SAN_NGX_BUILD)/Makefile
	$(MAKE) -C $(SAN_NGX_TREE) -f $(abspath $(SAN_NGX_BUILD))/Makefile modules

# --- Apache: the same objects as apache_module/build.mk, sanitized ----------
SAN_AP_BUILD   := $(SAN_BUILD)/apache
SAN_AP_MODULE  := $(SAN_AP_BUILD)/mod_spanprof.so
SAN_AP_CFLAGS  := $(CORE_CFLAGS) -O1 $(SAN_FLAGS)
SAN_AP_OBJS    := $(patsubst %.c,$(SAN_AP_BUILD)/obj/%.o,$(AP_SRCS) $(COMMON_SRCS)) \
                  $(patsubst $(GEN)/%.c,$(SAN_AP_BUILD)/obj/gen/%.o,$(GEN_SRCS))

$(SAN_AP_BUILD)/obj/apache_module/%.o: apache_module/%.c $(AP_HDRS) $(COMMON_HDRS) $(GEN)/.stamp
	@mkdir -p $(dir $@)
	$(CC) $(SAN_AP_CFLAGS) $(AP_CPPFLAGS) -c -o $@ $<

$(SAN_AP_BUILD)/obj/common/%.o: common/%.c $(COMMON_HDRS) $(GEN)/.stamp
	@mkdir -p $(dir $@)
	$(CC) $(SAN_AP_CFLAGS) -c -o $@ $<

$(SAN_AP_BUILD)/obj/gen/%.o: $(GEN)/%.c $(GEN)/.stamp
	@mkdir -p $(dir $@)
	$(CC) $(SAN_AP_CFLAGS) -Wno-error -c -o $@ $<

$(SAN_AP_MODULE): $(SAN_AP_OBJS) $(AP_BUILD)/mod_spanprof.map
	$(CC) -shared -fPIC $(SAN_FLAGS) -Wl,-z,relro -Wl,-z,now \
	    -Wl,--version-script=$(AP_BUILD)/mod_spanprof.map \
	    -o $@ $(SAN_AP_OBJS) $(CORE_LIBS) -ldl -lm

sanitize-apache: $(SAN_AP_MODULE)

sanitize: sanitize-nginx sanitize-apache

# --- the run ------------------------------------------------------------------
# nginx and Apache: propagation formats (12); nginx: propagation (10, 11),
# export failures (41, 43), OTLP/gRPC (47), profiling (60-62),
# keep rules (66), the control API (69), wall-clock profiling (90),
# memory profiling (93); Apache: tracing and propagation (70), export and
# its failures (71), profiling (72), sampling expressions (77), the control
# API (79); both: reloads, reopen and graceful restarts under load with
# cpu, wall and memory profiling (98). In the memory tests ASan owns malloc
# (libasan first in LD_PRELOAD) and the allocation hooks wrap it: the GOT
# slots of nginx, apache2 and their libraries point at libasan's malloc,
# which dlsym(RTLD_DEFAULT) also returns, so the hooks call it as they
# would call glibc's (libasan's own object is never patched). The
# test-only burn modules are the normal build's (fixtures, not under
# test).
SAN_TESTS      := t/10-propagation.t t/11-invalid-traceparent.t \
                  t/12-propagation-formats.t \
                  t/41-export-failures.t t/43-shutdown-flush.t \
                  t/47-grpc-export.t \
                  t/60-profiling-single.t t/61-profiling-concurrency.t \
                  t/62-profiling-lifecycle.t t/66-profiling-keep.t \
                  t/69-api.t t/90-profiling-wall.t t/93-profiling-memory.t \
                  t/70-apache-tracing.t t/71-apache-export.t \
                  t/71-apache-prefork-exporter.t \
                  t/72-apache-profiling.t t/77-apache-sampling.t \
                  t/79-apache-api.t t/98-profiling-restarts.t

# ASAN_OPTIONS and UBSAN_OPTIONS are read only by a sanitized process's
# runtime, so they may reach every program the tests start; LD_PRELOAD goes
# only to nginx and apache2 (SPANPROF_SERVER_PRELOAD, see the harness).
# detect_leaks=0: both servers leak their own memory at exit, so
# LeakSanitizer would only report them. Seen: nginx's master and its
# `nginx -s reload` / `nginx -t` processes exit with the cycle's ngx_alloc()
# blocks alive (and LeakSanitizer's exit code 23 then fails the reload);
# apache2 leaks pcre2 patterns and APR allocators, and in its children,
# not dumpable after setuid, LeakSanitizer cannot run at all ("fatal
# error"). common/ is leak-checked by the unit tests.
# ASan writes its reports to files, asan.PID (log_path), one per process.
# UBSan cannot: with libasan first in the process, libasan's exported
# __sanitizer_set_report_path takes libubsan's call, so UBSan prints to
# stderr, which for both servers is their error log; the harness saves the
# sanitizer lines of every server's error log when it stops it
# (SPANPROF_SANITIZER_LOGS), as errlog.*. Any file in the directory fails
# the run. One bad code path usually reports once per worker it kills
# (hundreds of files then), so the first three are printed in full and the
# SUMMARY and "runtime error" lines of all of them counted.
SAN_ENV = SPANPROF_REQUIRE_MODULE=1 \
          SPANPROF_NGX_MODULE=$(abspath $(SAN_NGX_MODULE)) \
          SPANPROF_APACHE_MODULE=$(abspath $(SAN_AP_MODULE)) \
          SPANPROF_SERVER_PRELOAD='$(SAN_LIBASAN) $(SAN_LIBUBSAN)' \
          SPANPROF_SANITIZER_LOGS=$(abspath $(SAN_REPORTS)) \
          ASAN_OPTIONS=log_path=$(abspath $(SAN_REPORTS))/asan:detect_leaks=0 \
          UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

test-sanitize: sanitize nginx apache
	@test -n '$(SAN_LIBASAN)' -a -n '$(SAN_LIBUBSAN)' \
	    || { echo 'test-sanitize: libasan/libubsan not found ($(CC) -print-file-name)' >&2; exit 1; }
	rm -rf $(SAN_REPORTS) && mkdir -p $(SAN_REPORTS) && chmod 0777 $(SAN_REPORTS)
	@status=0; \
	$(SAN_ENV) prove -I t/lib $(SAN_TESTS) || status=1; \
	test -d $(SAN_REPORTS) || { echo 'test-sanitize: $(SAN_REPORTS) is gone' >&2; exit 1; }; \
	reports=$$(find $(SAN_REPORTS) -type f | sort); \
	if [ -n "$$reports" ]; then \
	    for f in $$(echo "$$reports" | head -3); do \
	        echo "=== sanitizer report $$f"; cat "$$f"; \
	    done; \
	    echo "=== SUMMARY lines of all $$(echo "$$reports" | wc -l) reports (count, line):"; \
	    cat $$reports | grep -h '^SUMMARY\|runtime error:' | sort | uniq -c | sort -rn; \
	    echo "test-sanitize: FAILED, $$(echo "$$reports" | wc -l) sanitizer report(s) in $(SAN_REPORTS)" >&2; \
	    exit 1; \
	fi; \
	[ $$status = 0 ] || { echo 'test-sanitize: FAILED (tests)' >&2; exit 1; }; \
	echo 'test-sanitize: no sanitizer report'
