// Temporary files that a fatal signal removes: while one is registered, SIGINT, SIGTERM and SIGHUP
// (those not ignored) run a handler that unlinks every registered name, restores the signal's
// default action and raises it again, so the process still dies of the signal and its parent sees
// that — but no temporary stays behind. The handler only reads a fixed array and calls unlink(),
// signal() and raise(), all async-signal-safe.
#pragma once

#include <string>

namespace qkv {

// Registers a temporary before it is created; returns the slot to unregister it by, or -1 when the
// name is too long or every slot is taken (the file is then not removed on a signal).
int register_temporary(const std::string& name);
// Unregisters a slot of register_temporary (-1 is ignored) once its file is renamed or removed.
void unregister_temporary(int slot);

}  // namespace qkv
