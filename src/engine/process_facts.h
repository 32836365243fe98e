// What kvgate reads of another process to know whether a lock file's `kvgate up` still runs
// (running_instance.h): alive, a `kvgate up`, its resident memory. POSIX (process_facts_posix.cc)
// reads them under `proc` (/proc, or a recorded tree in tests); Windows
// (process_facts_windows.cc) asks the system and ignores `proc`: OpenProcess, the image's file
// name (kvgate.exe; another process's arguments are not readable there, so the lock file's own
// "kvgate up (pid N)" says which command it is), and its working set.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <sys/types.h>

namespace kvgate::engine {

// A small text file (a lock file, a /proc entry): at most 64 KiB, trailing newlines and spaces
// taken off; empty when unreadable.
std::string read_small_file(const std::filesystem::path& path);

// Running (POSIX: not a zombie waiting for its parent).
bool process_alive(const std::filesystem::path& proc, pid_t pid);
// A `kvgate up`: POSIX, argv[0] named kvgate and argv[1] "up"; Windows, the image kvgate.exe.
bool process_is_kvgate_up(const std::filesystem::path& proc, pid_t pid);
// Resident bytes (POSIX VmRSS, Windows the working set); 0 when unknown.
uint64_t process_resident_bytes(const std::filesystem::path& proc, pid_t pid);

}  // namespace kvgate::engine
