// POSIX signal numbers on every platform. kvgate names what it does to a child process by the
// POSIX signal (SIGTERM: stop; SIGKILL: kill; SIGSTOP/SIGCONT: freeze/thaw); Windows' C
// library defines only some of them, and util::Subprocess maps each to what Windows can do
// (subprocess_windows.cc). The numbers are Linux's.
#pragma once

#include <csignal>

#ifdef _WIN32
#ifndef SIGHUP
#define SIGHUP 1
#endif
#ifndef SIGKILL
#define SIGKILL 9
#endif
#ifndef SIGPIPE
#define SIGPIPE 13
#endif
#ifndef SIGCONT
#define SIGCONT 18
#endif
#ifndef SIGSTOP
#define SIGSTOP 19
#endif
#endif
