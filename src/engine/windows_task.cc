// kvgate up as a Windows Task Scheduler task (service_unit.h says why a task).
#include <algorithm>

#include <fmt/format.h>

#include "engine/service_unit.h"
#include "util/subprocess.h"
#include "util/xml_text.h"

namespace kvgate::engine {
namespace {

// cmd.exe's /c line: the environment, then kvgate up with its output appended to the log. A
// '%' would expand a variable there, and cmd /c has no escape for it: windows_task refuses it.
std::string cmd_line(const ServiceUnitOptions& o) {
  std::string line;
  for (const auto& [k, v] : o.environment) line += fmt::format("set \"{}={}\"&& ", k, v);
  if (o.clock_lock_command) line += *o.clock_lock_command + " & ";
  line += util::windows_quote(o.kvgate_binary) + " up";
  for (const auto& a : o.up_args) line += " " + util::windows_quote(a);
  if (!o.log_file.empty()) line += " >> " + util::windows_quote(o.log_file) + " 2>&1";
  return line;
}

}  // namespace

Result<std::string> windows_task(const ServiceUnitOptions& o) {
  const std::string line = cmd_line(o);
  if (line.find('%') != std::string::npos) {
    return Error("a '%' in the options cannot be passed through the task's cmd.exe line unchanged");
  }
  // Task Scheduler restarts at least a minute apart.
  const int restart_minutes = std::max(1, (o.restart_delay_s + 59) / 60);
  std::string t;
  t += "<?xml version=\"1.0\" encoding=\"UTF-16\"?>\n";
  // No "--" inside a comment (XML forbids it; Task Scheduler's parser refuses the file).
  t += "<Task version=\"1.2\" xmlns=\"http://schemas.microsoft.com/windows/2004/02/mit/task\">\n";
  t += fmt::format(
      "  <!-- Task {0}, written by `kvgate unit windows-task`. Install (no administrator needed):\n"
      "         schtasks /create /tn {0} /xml {0}.xml\n"
      "       Start now: schtasks /run /tn {0}   Stop: schtasks /end /tn {0}   Remove: schtasks /delete /tn "
      "{0} -->\n",
      o.name);
  t += fmt::format("  <RegistrationInfo><Description>{}</Description></RegistrationInfo>\n",
                   util::xml_escape(o.description));
  t += "  <!-- At this user's logon, in this user's session (the GPU driver and the cache are theirs). -->\n";
  t += "  <Triggers><LogonTrigger><Enabled>true</Enabled></LogonTrigger></Triggers>\n";
  t += "  <Principals><Principal id=\"Author\"><LogonType>InteractiveToken</LogonType>"
       "<RunLevel>LeastPrivilege</RunLevel></Principal></Principals>\n";
  t += "  <Settings>\n";
  t += "    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>\n";
  t += "    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>\n";
  t += "    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>\n";
  t += "    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>\n";
  t += "    <!-- kvgate restarts a crashed or hung engine itself; the task restarts kvgate when it gives up. "
       "-->\n";
  t += fmt::format("    <RestartOnFailure><Interval>PT{}M</Interval><Count>{}</Count></RestartOnFailure>\n",
                   restart_minutes, o.start_limit_burst);
  t += "    <Hidden>true</Hidden>\n";
  t += "  </Settings>\n";
  t += "  <Actions Context=\"Author\"><Exec>\n";
  t += "    <Command>cmd.exe</Command>\n";
  t += fmt::format("    <Arguments>{}</Arguments>\n", util::xml_escape("/d /s /c \"" + line + "\""));
  t += "  </Exec></Actions>\n";
  t += "</Task>\n";
  return t;
}

}  // namespace kvgate::engine
