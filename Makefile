# spanprof: `make` builds the nginx module, the unit tests (and later the
# Apache module and the CLI); `make test` runs every test under prove.

NGX_SRC     ?= /usr/share/nginx/src
BUILD       ?= build
CC          ?= cc
PROTOC_C    ?= protoc-c

GEN         := $(BUILD)/gen
PROTOS      := $(shell cd proto && find . -name '*.proto' | sort)
GEN_SRCS    := $(patsubst ./%.proto,$(GEN)/%.pb-c.c,$(PROTOS))
COMMON_SRCS := $(wildcard common/*/*.c)
COMMON_HDRS := $(wildcard common/*/*.h)

CFLAGS      ?= -O2 -g
CORE_CFLAGS := -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter \
               -fPIC -mtls-dialect=gnu2 -I. -I$(GEN) $(CFLAGS)
CORE_LIBS   := -lprotobuf-c -lcurl -lz -lunwind -lpthread -ljansson

NGX_BUILD   := $(BUILD)/nginx
NGX_TREE    := $(BUILD)/nginx-src
NGX_MODULE  := $(NGX_BUILD)/ngx_http_spanprof_module.so
# Test-only module with named CPU burners, built by the same configure.
NGX_BURN    := $(NGX_BUILD)/ngx_http_spanprof_burn_module.so

UNIT_SRCS   := $(wildcard t/unit/test_*.c)
UNIT_BINS   := $(patsubst t/unit/%.c,$(BUILD)/unit/%,$(UNIT_SRCS))
UNIT_CFLAGS := $(CORE_CFLAGS) -O1 -fsanitize=address,undefined -fno-omit-frame-pointer

.DEFAULT_GOAL := all

# Each part adds its targets to ALL (built by `make`) and its test programs
# to TEST_BINS (run by `make test` beside the unit tests and t/*.t).
ALL         := nginx unit
TEST_BINS   :=

.PHONY: all nginx unit test bench install clean

# --- protobuf-c sources ----------------------------------------------------
$(GEN)/.stamp: $(addprefix proto/,$(PROTOS))
	@mkdir -p $(GEN)
	cd proto && $(PROTOC_C) -I. --c_out=$(abspath $(GEN)) $(PROTOS)
	@touch $@
$(GEN_SRCS): $(GEN)/.stamp

# --- nginx dynamic module (nginx's own build, Debian's configure flags) ------
NGX_CONF_FLAGS = $(shell bash -c '. $(NGX_SRC)/conf_flags 2>/dev/null; echo "$${NGX_CONF_FLAGS[@]}"')

$(NGX_BUILD)/Makefile: config t/ngx_burn/config $(COMMON_SRCS) $(wildcard ngx_module/*.c) $(addprefix proto/,$(PROTOS))
	rm -rf $(NGX_TREE) && mkdir -p $(BUILD) && cp -r $(NGX_SRC) $(NGX_TREE)
	cd $(NGX_TREE) && ./configure $(NGX_CONF_FLAGS) \
	    --with-cc-opt='-g -O2 -fPIC -fstack-protector-strong -D_FORTIFY_SOURCE=2' \
	    --with-ld-opt='-Wl,-z,relro -Wl,-z,now -fPIC' \
	    --add-dynamic-module=$(CURDIR) \
	    --add-dynamic-module=$(CURDIR)/t/ngx_burn \
	    --builddir=$(abspath $(NGX_BUILD)) >/dev/null

nginx: $(NGX_BUILD)/Makefile
	$(MAKE) -C $(NGX_TREE) -f $(abspath $(NGX_BUILD))/Makefile modules

# --- build check in nginx's own configuration (CI: make -j2 build-compat) --
# Debian's nginx source configured as a user configures nginx.org's: nginx's
# default flags (-O -W... -Werror), the relative objs/ build directory; the
# dynamic module with gcc and with clang. Only the module is compiled. (The
# static --add-module build needs nginx's .c files, which Debian's tree
# has not: docs/compatibility.md says how it was checked.)
COMPAT          := $(BUILD)/compat
COMPAT_VARIANTS := gcc clang
COMPAT_OPTS_gcc    := --with-cc=gcc --add-dynamic-module=$(CURDIR)
COMPAT_OPTS_clang  := --with-cc=clang --add-dynamic-module=$(CURDIR)

.PHONY: build-compat
build-compat: $(foreach v,$(COMPAT_VARIANTS),$(COMPAT)/$(v)/.built)

$(COMPAT)/%/.built: config $(COMMON_SRCS) $(COMMON_HDRS) $(wildcard ngx_module/*.[ch]) $(addprefix proto/,$(PROTOS))
	rm -rf $(COMPAT)/$* && mkdir -p $(COMPAT) && cp -r $(NGX_SRC) $(COMPAT)/$*
	cd $(COMPAT)/$* && ./configure --with-compat $(COMPAT_OPTS_$*) \
	    >configure.log 2>&1 || { tail -20 configure.log; exit 1; }
	$(MAKE) -C $(COMPAT)/$* -f objs/Makefile modules >$(COMPAT)/$*.log 2>&1 \
	    || { tail -40 $(COMPAT)/$*.log; exit 1; }
	@# --with-compat: Debian's nginx loads it (its libraries resolve too).
	printf 'load_module %s;\npid nginx.pid;\nevents {}\nhttp { access_log off; }\n' \
	    $(abspath $(COMPAT)/$*/objs/ngx_http_spanprof_module.so) >$(COMPAT)/$*/load.conf
	/usr/sbin/nginx -t -q -e stderr -p $(abspath $(COMPAT)/$*)/ -c load.conf
	touch $@

# --- C unit tests for common/ (TAP, run by prove) ---------------------------
# common/ and the generated sources are compiled once with the sanitizers
# and every test links all of them (compiling them per test was most of a
# CI build: 30 tests x 70 files).
UNIT_COMMON_OBJS := $(patsubst %.c,$(BUILD)/unit/obj/%.o,$(COMMON_SRCS))
UNIT_GEN_OBJS    := $(patsubst $(GEN)/%.c,$(BUILD)/unit/obj/gen/%.o,$(GEN_SRCS))
UNIT_OBJS        := $(UNIT_COMMON_OBJS) $(UNIT_GEN_OBJS)

$(UNIT_COMMON_OBJS): $(BUILD)/unit/obj/%.o: %.c $(COMMON_HDRS) $(GEN)/.stamp
	@mkdir -p $(dir $@)
	$(CC) $(UNIT_CFLAGS) -c -o $@ $<

$(UNIT_GEN_OBJS): $(BUILD)/unit/obj/gen/%.o: $(GEN)/%.c $(GEN)/.stamp
	@mkdir -p $(dir $@)
	$(CC) $(UNIT_CFLAGS) -c -o $@ $<

$(BUILD)/unit/test_%: t/unit/test_%.c t/unit/tap.h t/unit/profile_fixture.h t/unit/ring_fixture.h $(UNIT_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(UNIT_CFLAGS) -It/unit -rdynamic -o $@ $< $(UNIT_OBJS) $(CORE_LIBS)

unit: $(UNIT_BINS)

# The allocation-hook tests: built without sanitizers (see the file).
-include t/unit/alloc.mk

-include apache_module/build.mk
-include cli/build.mk
-include bench/build.mk
-include fuzz/build.mk
-include sanitize.mk

all: $(ALL)

# The integration tests fail (not skip) when a module is missing.
# Every temporary file of the run goes under a directory of its own
# (TMPDIR): after prove, t/leftovers fails the run if a process still holds
# something under it (a server a test left running), and kills it. The
# directory is removed when all passed, kept (and named) otherwise.
# TESTS="t/85-serve-ui.t ..." runs only those.
test: all
	@run=$$(mktemp -d "$${TMPDIR:-/tmp}/spanprof-test-XXXXXX") && chmod 1777 "$$run" \
	&& echo "make test: temporary files under $$run" \
	&& TMPDIR="$$run" SPANPROF_TEST_RUN="$$run" SPANPROF_REQUIRE_MODULE=1 \
	   prove -I t/lib $(or $(TESTS),$(UNIT_BINS) $(TEST_BINS) t/*.t); \
	rc=$$?; perl t/leftovers "$$run" || rc=1; \
	if [ $$rc -eq 0 ]; then rm -rf "$$run"; else echo "make test: failed; kept $$run"; fi; \
	exit $$rc

clean:
	rm -rf $(BUILD)

# --- Debian packages (debian/, docs/packages.md) ---------------------------
# dpkg-buildpackage writes to the parent directory: the .debs, .changes and
# .buildinfo are moved into $(BUILD)/debs. `make test-packages` builds them,
# runs lintian and installs them into a fresh Debian 12 root.
DEB_OUT := $(BUILD)/debs

# The environment is cleared of make's variables: debian/rules (a makefile
# too) would otherwise take this make's command line (BUILD=...) as its own.
deb:
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL dpkg-buildpackage -b -us -uc -j2
	rm -rf $(DEB_OUT) && mkdir -p $(DEB_OUT)
	v=$$(dpkg-parsechangelog -S Version) && a=$$(dpkg --print-architecture) && \
	for p in spanprof libnginx-mod-http-spanprof libapache2-mod-spanprof; do \
	    mv ../$${p}_$${v}_$$a.deb $(DEB_OUT)/ || exit 1; \
	    if [ -e ../$${p}-dbgsym_$${v}_$$a.deb ]; then mv ../$${p}-dbgsym_$${v}_$$a.deb $(DEB_OUT)/; fi; \
	done && mv ../spanprof_$${v}_$$a.buildinfo ../spanprof_$${v}_$$a.changes $(DEB_OUT)/

test-packages:
	prove -v t/packages/install.t

.PHONY: deb test-packages
