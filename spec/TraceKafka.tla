-------------------------------- MODULE TraceKafka --------------------------------
(***************************************************************************************)
(* Trace validation: does the specification have a behaviour that matches a given      *)
(* trace (trace format v2, converted to TLA+ values) step by step?                      *)
(*                                                                                     *)
(* The trace is the constant TraceLog: a sequence of records                            *)
(*   [action |-> "LeaderAndIsr", actor |-> 2, state |-> [role |-> ..., log |-> ...]]    *)
(* one per event; `actor` is the broker or controller id (NoLeader for env, admin,      *)
(* client, clock, network, observer); `state` holds the FULL value, after the event, of every   *)
(* variable the trace observes (a delta trace is replayed first), in the encoding of    *)
(* KafkaReplication (absent keys as sentinels, ISRs as sets; docs/spec.md).             *)
(* Unobserved variables are unconstrained: any value the specification can reach.      *)
(*                                                                                     *)
(* At step i the specification takes an action of the event's name (with the actor's   *)
(* id where the action has one) or, if the observed state did not change, a stuttering  *)
(* step (events that change nothing, e.g. a ControllerChange event of a broker that     *)
(* loses the race); the observed variables must then equal state i.  TLC explores       *)
(* every way to do this breadth first.  The trace is accepted iff a state with          *)
(* l = Len(TraceLog) is reachable: checking the invariant TraceNotAccepted, TLC         *)
(* "violates" it exactly then (exit code 12, trace accepted); exit code 0 means no      *)
(* behaviour of the specification matches, and the search depth printed by TLC is the  *)
(* length of the longest matched prefix (l = 1 at depth 1, on Init): event number       *)
(* depth + 1 is the first one the specification cannot explain.                        *)
(*                                                                                     *)
(* The knobs and the era hooks are bound as for model checking (spec/tlc/config.py).   *)
(* Bounds should be set high enough not to cut the trace (they only bound the search).  *)
(* A trace is given by a module extending this one                                      *)
(* (TraceExample.tla by hand; `kcm validate --tlc` generates one, spec/tlc/validate.py). *)
(***************************************************************************************)
EXTENDS TruncationHW, TruncationKIP101, TruncationKIP279, TruncationKIP320

CONSTANT TraceLog

\* The trace as a value.  TLC evaluates a constant definition once, at start-up, but a constant
\* bound to a definition by `<-` (as `kcm validate --tlc` binds TraceLog) at every use: that is
\* the whole sequence literal rebuilt for each state, which made validation 10 to 30 times slower
\* on 51 events and the cost grow with the trace's length.
Trace == TraceLog

\* The controller's requests as the implementation sends them (see Seal): the configuration
\* binds SealRequests <- TraceSealRequests.
TraceSealRequests == TRUE

VARIABLE l    \* the number of trace events matched so far

trace_vars == <<vars, l>>

\* The specification's variable named by a trace variable name.
Var(name) ==
    CASE name = "controller" -> controller
      [] name = "controller_epoch" -> controller_epoch
      [] name = "assignment" -> assignment
      [] name = "leader" -> leader
      [] name = "leader_epoch" -> leader_epoch
      [] name = "isr" -> isr
      [] name = "partition_controller_epoch" -> partition_controller_epoch
      [] name = "partition_version" -> partition_version
      [] name = "acting_controller_epoch" -> acting_controller_epoch
      [] name = "partition_state" -> partition_state
      [] name = "replica_state" -> replica_state
      [] name = "alive" -> alive
      [] name = "broker_controller_epoch" -> broker_controller_epoch
      [] name = "role" -> role
      [] name = "local_leader_epoch" -> local_leader_epoch
      [] name = "local_isr" -> local_isr
      [] name = "log" -> log
      [] name = "hw" -> hw
      [] name = "hw_checkpoint" -> hw_checkpoint
      [] name = "epoch_start_offset" -> epoch_start_offset

\* The observed variables of event i equal the (primed) specification's.
Observed(i) == Trace[i].state
MatchesNext(i) == \A v \in DOMAIN Observed(i) : Var(v)' = Observed(i)[v]
Matches(i) == \A v \in DOMAIN Observed(i) : Var(v) = Observed(i)[v]

\* The actions an event may be, by the name the trace gives it.  `a` is the actor's id.
\* The implementation records a controller's resignation on a ControllerChange event as
\* ControllerElect; SendFetch/Fetch/... are the split fetch protocol.
SpecAction(name, a) ==
    CASE name = "ControllerElect" -> a \in Brokers /\ (ControllerElect(a) \/ ControllerResign(a))
      [] name = "ControllerResign" -> a \in Brokers /\ (ControllerResign(a))
      [] name = "BrokerReregister" -> a \in Brokers /\ (BrokerReregister(a))
      [] name = "BrokerChange" -> a \in Brokers /\ (BrokerChange(a))
      [] name = "TopicChange" -> a \in Brokers /\ (TopicChange(a))
      [] name = "IsrChangeNotification" -> a \in Brokers /\ (IsrChangeNotification(a))
      [] name = "CreateTopic" -> \E p \in Partitions : CreateTopic(p)
      [] name = "BrokerCrash" -> \E b \in Brokers : BrokerCrash(b)
      [] name = "ControllerCrash" -> \E b \in Brokers : b = controller /\ BrokerCrash(b)
      [] name = "BrokerRestart" -> \E b \in Brokers : BrokerRestart(b)
      [] name = "SessionExpire" -> \E b \in Brokers : SessionExpire(b)
      [] name = "DropMessage" -> DropMessage("controller") \/ DropMessage("broker")
      [] name = "LeaderAndIsr" -> a \in Brokers /\ (LeaderAndIsr(a))
      [] name = "UpdateMetadata" -> a \in Brokers /\ (UpdateMetadata(a))
      [] name = "Produce" -> \E b \in Brokers, p \in Partitions : Produce(b, p)
      [] name = "SendFetch" -> a \in Brokers /\ (\E p \in Partitions : SendFetch(a, p))
      [] name = "Fetch" -> a \in Brokers /\ (Fetch(a))
      [] name = "FetchResponse" -> a \in Brokers /\ (FetchResponse(a))
      [] name = "OffsetsForLeaderEpoch" -> a \in Brokers /\ (OffsetsForLeaderEpoch(a))
      [] name = "OffsetsForLeaderEpochResponse" -> a \in Brokers /\ (OffsetsForLeaderEpochResponse(a))
      [] name = "IsrShrink" -> a \in Brokers /\ (\E p \in Partitions, s \in SUBSET Brokers : IsrShrink(a, p, s))
      [] name = "HwCheckpoint" -> a \in Brokers /\ (HwCheckpoint(a))
      [] name = "Tick" -> \E b \in Brokers, p \in Partitions : Tick(b, p)
      [] OTHER -> FALSE

\* Match the next event with an action of the specification named by Action(name, actor), or, if
\* the event changed no observed variable, with a step that changes none of `unchanged` either.
\* (TraceKafkaOps uses it with the operations' actions and variables.)
MatchNext(Action(_, _), unchanged) ==
    /\ l < Len(Trace)
    /\ l' = l + 1
    /\ \/ Action(Trace[l + 1].action, Trace[l + 1].actor)
       \/ Observed(l + 1) = Observed(l) /\ UNCHANGED unchanged
    /\ MatchesNext(l + 1)

\* A trace begins where the implementation does (InitEmpty) or where the reproduction models do
\* (InitStable, the cluster the implementation's bootstrap leaves): a model's counterexample, or
\* Z3 BMC's, starts there.
TraceInit ==
    /\ l = 1
    /\ InitEmpty \/ InitStable
    /\ Matches(1)

TraceNext == MatchNext(SpecAction, vars)

TraceSpec == TraceInit /\ [][TraceNext]_trace_vars

\* "Violated" exactly when the whole trace has been matched (see the header).
TraceNotAccepted == l < Len(Trace)
=============================================================================
