------------------------------- MODULE MCopsLiveness -------------------------------
(***************************************************************************************)
(* Liveness of the controller's operations (KafkaOpsProperties): three brokers, the     *)
(* partition on <<1, 2>> led by 1 (also the controller), one operation per instance: a *)
(* controlled shutdown of 1, a reassignment to <<2, 3>>, or a topic deletion; no        *)
(* records, default knobs (KIP-320).                                                    *)
(* Crash faults and restarts: none in MCopsLiveness.cfg (its crash bound is the         *)
(* shutdown's own stop), one in MCopsLivenessCrash.cfg (MaxCrashes 2: the fault and the *)
(* stop) and in the reassignment and deletion instances none (with one, they outgrow   *)
(* TLC's liveness check: 24,000 states and still growing after four minutes).  No       *)
(* message loss, no re-creation of a deleted topic, no preferred elections (MCops       *)
(* checks their safety).                                                                *)
(***************************************************************************************)
EXTENDS KafkaControllerOps, TruncationKIP320, KafkaInvariants, KafkaOpsProperties

MC_Assignment == [p \in Partitions |-> <<1, 2>>]
MC_Targets == {<<2, 3>>}

\* The controller's and the brokers' steps; the operators' requests are added per instance.
OpsProcessNext ==
    \/ \E b \in Brokers : OpsControllerStep(b)
    \/ \E b \in Brokers : CoreStep(LeaderAndIsr(b)) \/ StopReplica(b) \/ ControlledShutdownResponse(b)
    \/ \E b \in Brokers, p \in Partitions : CoreStep(FetchRound(b, p)) \/ CoreStep(TruncationRound(b, p))

\* Crash faults (bounded by MaxCrashes, the controlled shutdown's stop included) and restarts.
FaultNext == \E b \in Brokers : CoreStep(BrokerCrash(b)) \/ OpsBrokerRestart(b)

\* One operation per instance keeps each small enough for TLC's liveness check:
\* MCopsLiveness.cfg a controlled shutdown of broker 1 (the leader and the controller),
\* MCopsLivenessReassign.cfg the reassignment, MCopsLivenessDelete.cfg the topic deletion.
ShutdownSpec == OpsInitStable /\ [][OpsProcessNext \/ RequestControlledShutdown(1)]_all_vars /\ OpsFairness
\* MCopsLivenessCrash.cfg: with crash faults that leave the shutdown its own stop in the crash bound (with
\* MaxCrashes = 2: one fault); a fault that took the stop's place would keep the leaving broker up for good.
ShutdownFaultNext == \E b \in Brokers : (crashes < MaxCrashes - 1 /\ CoreStep(BrokerCrash(b))) \/ OpsBrokerRestart(b)
ShutdownCrashSpec ==
    OpsInitStable /\ [][OpsProcessNext \/ ShutdownFaultNext \/ RequestControlledShutdown(1)]_all_vars /\ OpsFairness
ReassignSpec ==
    OpsInitStable /\ [][OpsProcessNext \/ FaultNext \/ \E p \in Partitions, t \in ReassignTargets : ReassignPartitions(p, t)]_all_vars
    /\ OpsFairness
DeleteSpec == OpsInitStable /\ [][OpsProcessNext \/ FaultNext \/ \E p \in Partitions : DeleteTopic(p)]_all_vars /\ OpsFairness

\* Broken variants, one per property (MCopsLiveness*Unfair.cfg): the controller event that completes the
\* operation loses its fairness (ControlledShutdownRequest, ReassignmentIsrChange, StopReplicaResponse);
\* dropping a fairness condition keeps every other guard sound.
UnfairShutdownSpec ==
    /\ OpsInitStable /\ [][OpsProcessNext \/ RequestControlledShutdown(1)]_all_vars
    /\ CoreEventFairness /\ ReassignFairness /\ ReassignIsrFairness /\ DeletionFairness /\ StopAnswerFairness
    /\ OpsRequestFairness /\ OpsFetchFairness
UnfairReassignSpec ==
    /\ OpsInitStable
    /\ [][OpsProcessNext \/ FaultNext \/ \E p \in Partitions, t \in ReassignTargets : ReassignPartitions(p, t)]_all_vars
    /\ CoreEventFairness /\ ShutdownFairness /\ ReassignFairness /\ DeletionFairness /\ StopAnswerFairness
    /\ OpsRequestFairness /\ OpsFetchFairness
UnfairDeleteSpec ==
    /\ OpsInitStable /\ [][OpsProcessNext \/ FaultNext \/ \E p \in Partitions : DeleteTopic(p)]_all_vars
    /\ CoreEventFairness /\ ShutdownFairness /\ ReassignFairness /\ ReassignIsrFairness /\ DeletionFairness
    /\ OpsRequestFairness /\ OpsFetchFairness
=============================================================================
