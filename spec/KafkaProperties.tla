------------------------------ MODULE KafkaProperties ------------------------------
(***************************************************************************************)
(* The progress properties of kcm (issue 25) as TLA+ temporal formulas, with the        *)
(* fairness they need.  The invariants (KafkaInvariants) say that nothing bad ever      *)
(* happens; these say that something good eventually does: a controller, a leader, a   *)
(* caught-up HW.  KafkaOpsProperties adds those of the controller's operations.         *)
(*                                                                                     *)
(* Fairness: the scheduler's, never the environment's.  A process whose step stays     *)
(* enabled is eventually scheduled: weak fairness (WF) on the controllers' event        *)
(* handling, on the brokers' handling of controller requests (message delivery: a       *)
(* request in flight to a broker that is up is eventually handled, as Kafka's send      *)
(* thread retries until it gets through), on the followers' fetches and truncations     *)
(* (a fetcher thread runs while it has a leader; ISR expansion is part of the leader's  *)
(* handling of a fetch) and on the leaders' ISR expiration of a follower that stays     *)
(* behind.  NO fairness on what the environment decides: crashes, restarts, session    *)
(* expiries, message loss, a slow follower expired early, client writes, admin          *)
(* commands.  Fewer fairness assumptions make a property harder to satisfy, so periodic *)
(* work that no property needs (HW checkpoints) gets none either.                       *)
(*                                                                                     *)
(* "Once the faults stop", honestly: the faults of a liveness model are bounded         *)
(* (MaxCrashes, MaxExpiries; no message loss; ISR shrinks only of a follower that is    *)
(* behind, IsrExpire), so in every behaviour the faults do stop.  A leads-to property   *)
(* says "P leads to Q unless another fault intervenes":                                 *)
(*     \A k \in Faults : (P /\ FaultCount = k) ~> (Q \/ FaultCount # k)                 *)
(* whenever P holds after the k-th fault, Q follows, or a (k+1)-th fault comes first.   *)
(* Faults being finite, every P after the last fault is followed by Q: this is P ~> Q   *)
(* on the fault-free suffix of every behaviour, and nothing is asked of a P that a      *)
(* later fault undoes (the live ISR member that crashes before it is elected).  (TLC    *)
(* cannot check a temporal operator with arguments: each property spells this out.)    *)
(***************************************************************************************)
EXTENDS KafkaReplication

\* Faults so far: crashes (a controlled shutdown's stop counts as one) and session expiries.
FaultCount == crashes + expiries
MaxFaults == MaxCrashes + MaxExpiries

Faults == 0..MaxFaults

(***************************************************************************************)
(* Fairness of the core's processes.                                                    *)
(*                                                                                     *)
(* One weak fairness condition per kind of step, over all brokers (and partitions): a   *)
(* kind of step that stays enabled somewhere is eventually taken somewhere.  That is    *)
(* weaker than one condition per broker, so what holds under it holds under per-broker  *)
(* fairness too; and it keeps TLC's liveness check small (each condition is checked on  *)
(* every state and transition).                                                         *)
(***************************************************************************************)
\* A broker's controller event thread: ControllerChange (election or resignation), BrokerChange,
\* TopicChange, ISR change notifications, Reregister.  A queued event is eventually handled.
ControllerStep(b) ==
    \/ ControllerElect(b) \/ ControllerResign(b) \/ BrokerChange(b) \/ TopicChange(b)
    \/ IsrChangeNotification(b) \/ BrokerReregister(b)

\* When b has an event to handle: a state predicate that implies ENABLED <<ControllerStep(b)>>_vars
\* (each disjunct is the guard of one of the steps, and each of those steps changes a variable: the
\* controller, b's acting epoch, its live view, its partition states or cache, its zombie events, or
\* its reregister flag).  TLC computes ENABLED of a controller event by evaluating the whole event
\* without the caching of an ordinary step, which does not finish on these events; a guard that
\* implies ENABLED makes the condition below no stronger than WF_vars(ControllerStep(b)), so what
\* holds under it holds under WF.  (The guard must imply that the specification can take the step: a
\* variant whose next-state relation leaves a step out must leave its guard out too.)
ControllerPending(b) ==
    \/ alive[b] /\ controller = NoLeader /\ controller_epoch < MaxControllerEpoch
    \/ alive[b] /\ acting_controller_epoch[b] # 0 /\ controller # b /\ controller # NoLeader
    \/ \E kind \in EventKinds : CanHandle(b, kind)
    \/ alive[b] /\ reregister[b]

\* Weak fairness of the controller threads, with ControllerPending for ENABLED.
ControllerFairness ==
    <>[](\E b \in Brokers : ControllerPending(b)) => []<><<\E b \in Brokers : ControllerStep(b)>>_vars

\* A broker's request handler: a controller request in flight to a broker that is up is eventually
\* handled (message delivery: the controller's send thread retries until the request gets through).
RequestFairness == WF_vars(\E b \in Brokers : LeaderAndIsr(b) \/ UpdateMetadata(b))

\* The followers' fetchers, with fused fetch rounds (a fetch, its handling by the leader with any ISR
\* expansion, and the response; a round that changes nothing is a stutter, so a follower that has
\* caught up is not forced to step).
FetchFairness == WF_vars(\E b \in Brokers, p \in Partitions : FetchRound(b, p) \/ TruncationRound(b, p))

\* The leader's ISR expiration (Kafka 2.3.0 core/src/main/scala/kafka/cluster/Partition.scala,
\* getOutOfSyncReplicas, run periodically by ReplicaManager.maybeShrinkIsr): an ISR follower whose log
\* end, as the leader last saw it, is not the leader's and has not caught up for replica.lag.time.max.ms
\* leaves the ISR.  Time is abstract: such a follower may be expired at any moment (a slow follower:
\* an environment decision), and one that stays behind is eventually expired (a follower that is down
\* or stuck: fairness).  A follower that has caught up is never expired, which keeps the model finite.
IsrExpire(b, p, f) == follower_leo[b][p][f] # Len(log[b][p]) /\ IsrShrink(b, p, {f})
IsrExpireNext == \E b \in Brokers, p \in Partitions, f \in Brokers : IsrExpire(b, p, f)
IsrFairness == WF_vars(IsrExpireNext)

Fairness == ControllerFairness /\ RequestFairness /\ FetchFairness /\ IsrFairness

(***************************************************************************************)
(* The properties.                                                                      *)
(***************************************************************************************)
\* b is up and registered, as the controller sees a live broker once it handles the change.
Live(b) == alive[b] /\ registered[b] # 0

\* A controller in office: holds /controller and acts in the current controller epoch.
ControllerInOffice ==
    controller # NoLeader /\ alive[controller] /\ acting_controller_epoch[controller] = controller_epoch

(* ControllerElected: a controller eventually exists while a broker lives. *)
ControllerElected ==
    \A k \in Faults : ((\E b \in Brokers : Live(b)) /\ FaultCount = k) ~> (ControllerInOffice \/ FaultCount # k)

\* p has a leader that is up and leads in the store's leader epoch (CurrentLeader).
HasLiveLeader(p) == CurrentLeader(p) # NoLeader /\ alive[CurrentLeader(p)]

\* p exists and an ISR member is live and not among `leaving` (brokers shutting down).
LiveIsrMember(p, leaving) == assignment[p] # <<>> /\ \E b \in isr[p] \ leaving : Live(b)

(* LeaderElected: a partition with a live ISR member not shutting down eventually has a live
   leader.  Conditional on the ISR: with clean elections only, a partition whose ISR members
   are all dead has no leader to elect (WritesAccepted shows what that costs). *)
LeaderElected ==
    \A p \in Partitions, k \in Faults : (LiveIsrMember(p, {}) /\ FaultCount = k) ~> (HasLiveLeader(p) \/ FaultCount # k)

\* The current leader's HW is the log end of every live ISR member (all of them caught up).
CaughtUp(p) ==
    LET l == CurrentLeader(p)
    IN l # NoLeader => \A b \in isr[p] : alive[b] => hw[l][p] = Len(log[b][p])

(* HighWatermarkCatchesUp: once faults and client writes stop, each partition's HW eventually
   reaches the log end of its ISR.  Writes (bounded by MaxRecords) and faults are finite in every
   behaviour, so "eventually always" is the property on the quiet suffix: after the last write and
   the last fault, the HW catches up and stays. *)
HighWatermarkCatchesUp == <>[](\A p \in Partitions : CaughtUp(p))

\* Every live replica of p is in its ISR, once p has a live leader.
FullyReplicated(p) == HasLiveLeader(p) => \A b \in Range(assignment[p]) : Live(b) => b \in isr[p]

(* ReplicasRejoinIsr: once faults stop, each live replica of a led partition is back in its ISR
   (no partition stays under-replicated).  Kafka 2.3.0 Partition.scala maybeExpandIsr: the leader
   adds an assigned follower to the ISR at the fetch that brings it to the HW from an offset past
   the leader epoch's start; a live follower keeps fetching, so with writes stopped it gets there.
   HighWatermarkCatchesUp asks nothing of a replica outside the ISR: a follower that never comes
   back (a restarted broker never told to follow, a fetch lost and never retried) leaves it true. *)
ReplicasRejoinIsr == <>[](\A p \in Partitions : FullyReplicated(p))

\* p accepts a produce request with acks = -1: a live leader whose ISR the design takes writes with
\* (AcceptsWrite; by default at least MinIsr members: Produce's guard, without the bound on records).
Writable(p) ==
    \E b \in Brokers : alive[b] /\ role[b][p] = "leader" /\ local_leader_epoch[b][p] # -1
                       /\ AcceptsWrite(Cardinality(local_isr[b][p]))

LiveReplica(p) == assignment[p] # <<>> /\ \E b \in Range(assignment[p]) : Live(b)

(* WritesAccepted (availability, added for the min_isr and unclean_election knobs): a partition with
   a live replica eventually accepts writes.  Not one of the seven progress properties: the safe
   design gives it up on purpose where its only ISR member is dead (clean elections) or its ISR is
   smaller than min_isr. *)
WritesAccepted ==
    \A p \in Partitions, k \in Faults :
        (LiveReplica(p) /\ FaultCount = k) ~> (Writable(p) \/ FaultCount # k)
=============================================================================
