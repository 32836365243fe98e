// Private files: what kvgate writes that holds secrets or conversation text (the engine's
// key file, the session store and its WAL, logs) is readable by its owner only —
// directories 0700, files 0600 — whatever the process umask, so another local user can
// neither read conversations nor learn the key that bypasses the gateway.
//
// Functions are safe to call from any thread; they do not follow a symlink at the file
// itself (O_NOFOLLOW) and fix the mode of what already exists.
#pragma once

#include <filesystem>
#include <string_view>

#include "util/result.h"

namespace kvgate::util {

// Creates `dir` (and missing parents) and sets `dir` itself to 0700 — when this call created
// it, or it is this user's and not sticky (a shared directory like /tmp keeps its mode).
Status make_private_dir(const std::filesystem::path& dir);

// Creates `file` empty if missing, mode 0600; an existing file is set to 0600.
Status make_private_file(const std::filesystem::path& file);

// Replaces `file` with `content`, mode 0600 from its creation (a temporary beside it, then
// rename), so no reader ever sees it with wider permissions or half written.
Status write_private_file(const std::filesystem::path& file, std::string_view content);

}  // namespace kvgate::util
