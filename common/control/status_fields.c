#include "common/control/status_fields.h"

#define SP_STATUS_ROW(name, kind, help)  { #name, SP_STATUS_##kind, help },

const sp_status_field_t  sp_status_fields[] = {
    SP_STATUS_FIELDS(SP_STATUS_ROW)
};
