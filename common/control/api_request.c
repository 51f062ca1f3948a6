#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/control/api_request.h"
#include "common/control/control_body.h"
#include "common/control/status_json.h"
#include "common/control/status_prom.h"

#define JSON_TYPE  "application/json"

/* The value of name=value in a query string, or NULL (len in *vlen). */
static const char *
query_arg(const char *q, const char *name, size_t *vlen)
{
    size_t  n = strlen(name);

    while (q != NULL && *q) {
        if (strncmp(q, name, n) == 0 && q[n] == '=') {
            *vlen = strcspn(q + n + 1, "&");
            return q + n + 1;
        }
        q = strchr(q, '&');
        if (q != NULL) {
            q++;
        }
    }
    return NULL;
}

static int
wants_prometheus(const sp_api_request_t *req)
{
    const char  *v;
    size_t       n;

    v = query_arg(req->query, "format", &n);
    if (v != NULL) {
        return (n == 10 && strncmp(v, "prometheus", 10) == 0)
               || (n == 4 && strncmp(v, "text", 4) == 0);
    }
    return req->accept != NULL && strstr(req->accept, "text/plain") != NULL
           && strstr(req->accept, "application/json") == NULL;
}

static int
error(sp_api_response_t *resp, int status, const char *msg)
{
    resp->status = status;
    resp->content_type = JSON_TYPE;
    resp->body = sp_status_json_error(msg, &resp->body_len);
    return resp->body != NULL ? 0 : -1;
}

int
sp_api_is_write(const char *method)
{
    return strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0
           || strcmp(method, "DELETE") == 0;
}

int
sp_api_handle(const sp_api_request_t *req, const sp_api_info_t *info,
    sp_control_shm_t *c, sp_api_response_t *resp)
{
    sp_control_body_t   body;
    sp_control_state_t  st;
    char                err[256];

    memset(resp, 0, sizeof(*resp));

    if (strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0) {
        resp->status = 200;
        if (wants_prometheus(req)) {
            resp->content_type = SP_STATUS_PROM_CONTENT_TYPE;
            resp->body = sp_status_prometheus(info, c, &resp->body_len);
        } else {
            resp->content_type = JSON_TYPE;
            resp->body = sp_status_json(info, c, &resp->body_len);
        }
        return resp->body != NULL ? 0 : -1;
    }

    if (!sp_api_is_write(req->method)) {
        resp->allow = SP_API_ALLOW;
        return error(resp, 405, "method not allowed: use GET, HEAD, POST, "
                     "PUT or DELETE");
    }
    if (!info->write) {
        return error(resp, 403, "this location is read-only (write=off)");
    }

    if (strcmp(req->method, "DELETE") == 0) {
        body.profiling = 0;
        body.rate_hz = 0;
        body.cpu = body.wall = -1;
        body.wall_rate_hz = 0;
        body.memory = -1;
    } else if (sp_control_body_parse(req->body, req->body_len, &body, err,
                                     sizeof(err)) != 0)
    {
        return error(resp, 400, err);
    }
    if (body.profiling == 1 && !info->profiling) {
        return error(resp, 409, "profiling is not configured "
                     "(no location profiles): it cannot be turned on");
    }
    sp_control_set_types(c, body.profiling, body.rate_hz, body.cpu, body.wall,
                         body.wall_rate_hz, body.memory, &st);

    resp->status = 200;
    resp->content_type = JSON_TYPE;
    resp->body = sp_status_json(info, c, &resp->body_len);
    return resp->body != NULL ? 0 : -1;
}
