# spanprof CLI (cli/), the demo's backend module (demo/ngx_demo_backend/)
# and `make install`. Included by the top Makefile, which defines BUILD, CC,
# CORE_CFLAGS, UNIT_CFLAGS, GEN, COMMON_SRCS, COMMON_HDRS, NGX_SRC,
# NGX_CONF_FLAGS and NGX_MODULE.

CLI_BIN        := $(BUILD)/cli/spanprof
CLI_LIB_SRCS   := cli/util.c cli/spans.c cli/profiles.c cli/flame.c
# spanprof serve (cli/serve/): its UI files are compiled in by embed.pl.
SERVE_SRCS     := $(wildcard cli/serve/*.c)
SERVE_UI       := cli/serve/ui/index.html cli/serve/ui/app.js cli/serve/ui/style.css
SERVE_ASSETS   := $(BUILD)/cli/ui_assets.c
CLI_SRCS       := cli/main.c $(CLI_LIB_SRCS) $(SERVE_SRCS)
# Only the server-agnostic parts of common/ the CLI needs: buffers, arena,
# hex ids and the pprof encoder (with its gzip helper).
CLI_COMMON     := $(filter common/base/arena.c common/base/buf.c common/trace/ids.c \
                           common/export/gzip.c common/export/pprof.c,$(COMMON_SRCS))
CLI_GEN        := $(GEN)/pprof/profile.pb-c.c \
                  $(addprefix $(GEN)/opentelemetry/proto/, \
                    collector/trace/v1/trace_service.pb-c.c \
                    collector/profiles/v1development/profiles_service.pb-c.c \
                    trace/v1/trace.pb-c.c common/v1/common.pb-c.c \
                    resource/v1/resource.pb-c.c \
                    profiles/v1development/profiles.pb-c.c)
CLI_JANSSON_CFLAGS := $(shell pkg-config --cflags jansson 2>/dev/null)
CLI_JANSSON_LIBS   := $(shell pkg-config --libs jansson 2>/dev/null || echo -ljansson)
CLI_CFLAGS     := $(filter-out -fPIC -mtls-dialect=%,$(CORE_CFLAGS)) \
                  $(CLI_JANSSON_CFLAGS)
CLI_LIBS       := $(CLI_JANSSON_LIBS) -lprotobuf-c -lz -lm
SERVE_LIBS     := -lsqlite3 -lmicrohttpd -lnghttp2 -lpthread
CLI_DEPS       := cli/spanprof.h $(CLI_COMMON) $(COMMON_HDRS) $(GEN)/.stamp

CLI_TEST       := $(BUILD)/cli/test_cli

$(SERVE_ASSETS): cli/serve/embed.pl $(SERVE_UI)
	@mkdir -p $(dir $@)
	perl cli/serve/embed.pl $(SERVE_UI) > $@.tmp && mv $@.tmp $@

$(CLI_BIN): $(CLI_SRCS) $(CLI_DEPS) $(wildcard cli/serve/*.h) $(SERVE_ASSETS)
	@mkdir -p $(dir $@)
	$(CC) $(CLI_CFLAGS) -o $@ $(CLI_SRCS) $(SERVE_ASSETS) $(CLI_COMMON) \
	    $(CLI_GEN) $(CLI_LIBS) $(SERVE_LIBS)

# C unit tests of the CLI's parts (TAP), with the sanitizers; UBSan (with
# float-to-integer casts, which GCC leaves out of "undefined") ends the
# test at the first finding, not just prints it: hostile counts and times
# must not overflow.
$(CLI_TEST): cli/test_cli.c $(CLI_LIB_SRCS) t/unit/tap.h $(CLI_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -mtls-dialect=%,$(UNIT_CFLAGS)) $(CLI_JANSSON_CFLAGS) \
	    -fsanitize=float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow \
	    -It/unit -o $@ cli/test_cli.c $(CLI_LIB_SRCS) $(CLI_COMMON) \
	    $(CLI_GEN) $(CLI_LIBS)

# spanprof serve's parts under the same sanitizers (its listeners and UI:
# t/84-t/87).
SERVE_TEST      := $(BUILD)/cli/test_serve
SERVE_TEST_SRCS := $(filter-out cli/serve/serve_main.c cli/serve/serve_http.c \
                     cli/serve/serve_api.c cli/serve/import_dir.c \
                     cli/serve/serve_grpc.c cli/serve/serve_grpc_listen.c,$(SERVE_SRCS))
$(SERVE_TEST): cli/test_serve.c $(SERVE_TEST_SRCS) $(wildcard cli/serve/*.h) cli/util.c t/unit/tap.h $(CLI_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -mtls-dialect=%,$(UNIT_CFLAGS)) $(CLI_JANSSON_CFLAGS) \
	    -fno-sanitize-recover=undefined -It/unit -o $@ cli/test_serve.c \
	    $(SERVE_TEST_SRCS) cli/util.c $(CLI_COMMON) $(CLI_GEN) $(CLI_LIBS) \
	    $(SERVE_LIBS)

cli: $(CLI_BIN) $(CLI_TEST) $(SERVE_TEST)

# --- the demo's backend: a tiny nginx module with a CPU-heavy route ---------
# Built by its own configure (Debian's flags, --with-compat) in its own copy
# of the nginx sources, so it never races the main module's build; its .so
# loads beside build/nginx/ngx_http_spanprof_module.so.
DEMO_NGX_BUILD := $(BUILD)/demo-nginx
DEMO_NGX_TREE  := $(BUILD)/demo-nginx-src
DEMO_MODULE    := $(DEMO_NGX_BUILD)/ngx_http_demo_backend_module.so

$(DEMO_NGX_BUILD)/Makefile: demo/ngx_demo_backend/config
	rm -rf $(DEMO_NGX_TREE) && mkdir -p $(BUILD) && cp -r $(NGX_SRC) $(DEMO_NGX_TREE)
	cd $(DEMO_NGX_TREE) && ./configure $(NGX_CONF_FLAGS) \
	    --with-cc-opt='-g -O2 -fPIC -fstack-protector-strong -D_FORTIFY_SOURCE=2' \
	    --with-ld-opt='-Wl,-z,relro -Wl,-z,now -fPIC' \
	    --add-dynamic-module=$(CURDIR)/demo/ngx_demo_backend \
	    --builddir=$(abspath $(DEMO_NGX_BUILD)) >/dev/null

demo-module: $(DEMO_NGX_BUILD)/Makefile
	$(MAKE) -C $(DEMO_NGX_TREE) -f $(abspath $(DEMO_NGX_BUILD))/Makefile modules

ALL       += cli demo-module
TEST_BINS += $(CLI_TEST) $(SERVE_TEST)

# --- install ----------------------------------------------------------------
# The server modules to $(PREFIX)/lib/spanprof/ (AP_MODULE, mod_spanprof.so,
# comes from apache_module/build.mk), the CLI to $(PREFIX)/bin.
PREFIX  ?= /usr/local

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/spanprof
	install -m 0755 $(CLI_BIN) $(DESTDIR)$(PREFIX)/bin/spanprof
	install -m 0644 $(NGX_MODULE) $(AP_MODULE) $(DESTDIR)$(PREFIX)/lib/spanprof/

.PHONY: cli demo-module install
