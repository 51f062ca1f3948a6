#ifndef SP_VERSION_H
#define SP_VERSION_H

#define SP_VERSION      "0.1.0"
#define SP_SCOPE_NAME   "spanprof"

#endif
