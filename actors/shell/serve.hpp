// The process shell of troupe-scheduler: serving. While this process leads,
// runs the actor system: binds the actors' ports to the bus, seeds the
// actors with what was restored, subscribes the router to the API subjects
// and the intake and handoff consumers, then serves until told to stop (leadership's
// loop), and stops the actors in order.
#pragma once

#include "actors/shell/bootstrap.hpp"
#include "actors/shell/leadership.hpp"
#include "actors/shell/local_view.hpp"
#include "actors/shell/restore.hpp"
#include "actors/shell/standby.hpp"

namespace troupe::shell {

// The process's exit code: 0 after a clean stop, 1 when a subscription failed.
// `local`: the metrics collector's view of the actors, served while they run.
// `front`: this process's standby front door, handed over and stopped once
// the router hears the submit subjects.
int serve(Bus& bus, Leadership& lead, Restore& start, Options& o, const StopSignals& signals,
          LocalView& local, std::unique_ptr<StandbyFront>& front);

}  // namespace troupe::shell
