#include <string.h>

#include "common/export/export_protocol.h"

static const char *const  names[] = {
    [SP_EXPORT_GRPC] = "grpc",
    [SP_EXPORT_HTTP_PROTOBUF] = "http/protobuf",
    [SP_EXPORT_HTTP_JSON] = "http/json",
};

int
sp_export_protocol_parse(const char *name, sp_export_protocol_t *p)
{
    size_t  i;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(name, names[i]) == 0) {
            *p = (sp_export_protocol_t) i;
            return 0;
        }
    }
    return -1;
}

const char *
sp_export_protocol_name(sp_export_protocol_t p)
{
    return (unsigned) p < sizeof(names) / sizeof(names[0]) ? names[p]
                                                            : "unknown";
}
