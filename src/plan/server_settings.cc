#include "plan/server_settings.h"

namespace kvgate::plan {

const char* fork_name(Fork fork) { return fork == Fork::kIk ? "ik" : "mainline"; }

}  // namespace kvgate::plan
