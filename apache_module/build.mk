# mod_spanprof for Apache httpd 2.4 (included by the top Makefile).
#   make apache  -> build/apache/mod_spanprof.so
#                   build/apache/mod_spanprof_burn.so (test-only CPU burners)
# The module is compiled with the core's flags (-mtls-dialect=gnu2 for the
# otel_thread_ctx_v1 TLS variable) against apxs's include directories, and
# links common/ and the protobuf-c sources in.

APXS        ?= apxs
AP_BUILD    := $(BUILD)/apache
AP_MODULE   := $(AP_BUILD)/mod_spanprof.so
AP_BURN     := $(AP_BUILD)/mod_spanprof_burn.so

AP_INCLUDES := $(shell $(APXS) -q INCLUDEDIR 2>/dev/null) \
               $(shell $(APXS) -q APR_INCLUDEDIR 2>/dev/null) \
               $(shell $(APXS) -q APU_INCLUDEDIR 2>/dev/null)
# httpd's own initializers (module record, command_rec) leave fields out.
AP_CPPFLAGS := -Wno-missing-field-initializers \
               $(shell $(APXS) -q EXTRA_CPPFLAGS 2>/dev/null) \
               $(addprefix -isystem ,$(sort $(AP_INCLUDES)))

AP_SRCS     := $(wildcard apache_module/*.c)
AP_HDRS     := $(wildcard apache_module/*.h)
AP_OBJS     := $(patsubst %.c,$(AP_BUILD)/obj/%.o,$(AP_SRCS) $(COMMON_SRCS)) \
               $(patsubst $(GEN)/%.c,$(AP_BUILD)/obj/gen/%.o,$(GEN_SRCS))

ALL         += apache

.PHONY: apache

apache: $(AP_MODULE) $(AP_BURN)

$(AP_BUILD)/obj/apache_module/%.o: apache_module/%.c $(AP_HDRS) $(COMMON_HDRS) $(GEN)/.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CORE_CFLAGS) $(AP_CPPFLAGS) -c -o $@ $<

$(AP_BUILD)/obj/common/%.o: common/%.c $(COMMON_HDRS) $(GEN)/.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CORE_CFLAGS) -c -o $@ $<

$(AP_BUILD)/obj/gen/%.o: $(GEN)/%.c $(GEN)/.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CORE_CFLAGS) -Wno-error -c -o $@ $<

# Only the module record and the OTEP 4947 TLS variable are exported: the
# core's symbols stay out of httpd's global namespace.
$(AP_BUILD)/mod_spanprof.map: apache_module/build.mk
	@mkdir -p $(dir $@)
	printf '{ global: spanprof_module; otel_thread_ctx_v1; local: *; };\n' > $@

$(AP_MODULE): $(AP_OBJS) $(AP_BUILD)/mod_spanprof.map
	$(CC) -shared -fPIC -Wl,-z,relro -Wl,-z,now \
	    -Wl,--version-script=$(AP_BUILD)/mod_spanprof.map \
	    -o $@ $(AP_OBJS) $(CORE_LIBS) -ldl -lm

$(AP_BURN): t/mod_burn/mod_spanprof_burn.c t/spin_loop.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter -O2 -g \
	    -fPIC -shared $(AP_CPPFLAGS) -o $@ $<
