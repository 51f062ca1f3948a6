#include <stdlib.h>
#include <string.h>

#include "common/export/grpc_call.h"

char *
sp_grpc_method_url(const char *endpoint, const char *method)
{
    const char  *host = strstr(endpoint, "://");
    size_t       n, m = strlen(method);
    char        *url;

    host = host != NULL ? host + 3 : endpoint;
    n = (size_t) (host - endpoint) + strcspn(host, "/?#");
    url = malloc(n + m + 1);
    if (url != NULL) {
        memcpy(url, endpoint, n);
        memcpy(url + n, method, m + 1);
    }
    return url;
}
