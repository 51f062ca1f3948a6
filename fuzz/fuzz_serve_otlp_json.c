/* spanprof serve's OTLP/JSON decoder (serve_otlp_json_decode): any bytes a
 * client posts with Content-Type: application/json. The first byte picks
 * the message (traces or profiles request). Properties: a decoded message
 * passes protobuf_c_message_check (no NULL string, no hole in a repeated
 * field) and packs; a refused one says why; nothing leaks (ASan). */

#include <stdint.h>
#include <stdlib.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#include "cli/serve/otlp_json_decode.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const ProtobufCMessageDescriptor  *d;
    ProtobufCMessage                  *m;
    char                               err[256] = "";
    size_t                             n;
    uint8_t                           *buf;

    if (size < 1) {
        return 0;
    }
    d = data[0] & 1
        ? &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor
        : &opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor;
    m = serve_otlp_json_decode(d, (const char *) data + 1, size - 1, err,
                               sizeof(err));
    if (m == NULL) {
        FUZZ_CHECK(err[0] != '\0');
        return 0;
    }
    FUZZ_CHECK(protobuf_c_message_check(m));
    n = protobuf_c_message_get_packed_size(m);
    buf = malloc(n + 1);
    FUZZ_CHECK(buf != NULL);
    FUZZ_CHECK(protobuf_c_message_pack(m, buf) == n);
    free(buf);
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}
