---------------------------- MODULE KafkaOpsProperties ----------------------------
(***************************************************************************************)
(* The progress properties of the controller's operations (KafkaControllerOps):         *)
(* controlled shutdown, reassignment and topic deletion complete.  Fairness, faults and *)
(* the form "P leads to Q unless another fault intervenes" as in KafkaProperties, whose *)
(* ControllerElected also holds here.                                                   *)
(***************************************************************************************)
EXTENDS KafkaControllerOps, KafkaProperties

(***************************************************************************************)
(* Fairness.  A controller's events queue up and are handled in order (Kafka's          *)
(* ControllerEventManager), so no kind of event starves another: one condition per kind *)
(* (one for the core's events, one per operation event).  As in KafkaProperties, TLC    *)
(* cannot compute ENABLED of a whole controller event, so each condition is written     *)
(* with a guard that implies ENABLED: the guard of the event, which then changes a      *)
(* variable (the controller, b's acting epoch or context, a request taken off the       *)
(* network, an admin node).  The operators' requests (the first RequestControlledShutdown *)
(* of a broker, ReassignPartitions, DeleteTopic) get no fairness; neither do preferred  *)
(* elections, which no property here needs.  A leaving broker's retry of its controlled *)
(* shutdown is the broker's own step (Kafka 2.3.0 KafkaServer.doControlledShutdown), so *)
(* it is weakly fair.                                                                   *)
(***************************************************************************************)
OpsCoreStep(b) ==
    \/ OpsControllerElect(b) \/ OpsBrokerReregister(b) \/ OpsBrokerChange(b) \/ OpsTopicChange(b)
    \/ CoreStep(ControllerResign(b)) \/ CoreStep(IsrChangeNotification(b))

ShutdownPending(b) == \E m \in ctl_msgs : m.type = "ControlledShutdownRequest" /\ m.dst = b /\ InOffice(b)
ReassignPending(b) == InOffice(b) /\ \E p \in Partitions : reassign_req[p] # <<>> /\ ctl_reassign[b][p] = <<>>
ReassignIsrPending(b) == InOffice(b) /\ \E p \in Partitions : Progress(b, p)
DeletionPending(b) == InOffice(b) /\ \E p \in delete_req : p \notin ctl_deleting[b]
StopAnswerPending(b) == alive[b] /\ \E m \in ctl_msgs : m.type = "StopReplicaResponse" /\ m.dst = b

OpsControllerStep(b) ==
    \/ OpsCoreStep(b) \/ ControlledShutdownRequest(b) \/ PartitionReassignment(b) \/ ReassignmentIsrChange(b)
    \/ TopicDeletion(b) \/ StopReplicaResponse(b)

CoreEventFairness ==
    <>[](\E b \in Brokers : ControllerPending(b)) => []<><<\E b \in Brokers : OpsCoreStep(b)>>_all_vars
ShutdownFairness ==
    <>[](\E b \in Brokers : ShutdownPending(b)) => []<><<\E b \in Brokers : ControlledShutdownRequest(b)>>_all_vars
ReassignFairness ==
    <>[](\E b \in Brokers : ReassignPending(b)) => []<><<\E b \in Brokers : PartitionReassignment(b)>>_all_vars
ReassignIsrFairness ==
    <>[](\E b \in Brokers : ReassignIsrPending(b)) => []<><<\E b \in Brokers : ReassignmentIsrChange(b)>>_all_vars
DeletionFairness ==
    <>[](\E b \in Brokers : DeletionPending(b)) => []<><<\E b \in Brokers : TopicDeletion(b)>>_all_vars
StopAnswerFairness ==
    <>[](\E b \in Brokers : StopAnswerPending(b)) => []<><<\E b \in Brokers : StopReplicaResponse(b)>>_all_vars

OpsControllerFairness ==
    CoreEventFairness /\ ShutdownFairness /\ ReassignFairness /\ ReassignIsrFairness /\ DeletionFairness
    /\ StopAnswerFairness

\* Each broker's request handling, per broker and per connection: the controller's requests (LeaderAndIsr,
\* StopReplica) come in order on the controller's connection to b, the answer to b's own controlled shutdown on
\* b's connection to the controller, and b's handler threads serve both.  One condition for all of them would
\* let a leaving broker's answers and retries starve its own or another broker's LeaderAndIsr.
OpsRequestFairness ==
    \A b \in Brokers :
        /\ WF_all_vars(CoreStep(LeaderAndIsr(b)) \/ StopReplica(b))
        /\ WF_all_vars(ControlledShutdownResponse(b))

ShutdownRetryFairness == WF_all_vars(\E b \in Brokers : cs_requested[b] /\ RequestControlledShutdown(b))

OpsFetchFairness ==
    WF_all_vars(\E b \in Brokers, p \in Partitions : CoreStep(FetchRound(b, p)) \/ CoreStep(TruncationRound(b, p)))

OpsFairness == OpsControllerFairness /\ OpsRequestFairness /\ ShutdownRetryFairness /\ OpsFetchFairness

(***************************************************************************************)
(* The properties.                                                                      *)
(***************************************************************************************)
\* b has stopped and leads nothing in the store.
Stopped(b) == ~alive[b] /\ \A p \in Partitions : leader[p] # b

\* Every partition b leads has another live ISR member to take over.
Movable(b) == \A p \in Partitions : leader[p] = b => \E r \in isr[p] \ {b} : Live(r)

(* ControlledShutdownCompletes: a controlled shutdown of a live broker whose leaderships can move
   (Movable) eventually moves every leadership off it and completes: the broker stops, leading
   nothing.  The stop counts as a crash (ControlledShutdownResponse), and comes only once the
   controller answers that b leads no partition any more; a refusal leaves b up, the fault count
   unchanged, and b asks again.  A broker that is the last live ISR member of a partition it leads
   is refused by design (Kafka's broker retries and at last stops uncleanly; the model retries), so
   the property asks nothing of it. *)
ControlledShutdownCompletes ==
    \A b \in Brokers, k \in Faults :
        (cs_requested[b] /\ alive[b] /\ Movable(b) /\ FaultCount = k) ~> (Stopped(b) \/ FaultCount # k)

\* Every broker of a replica list is live.
AllLive(replicas) == \A b \in Range(replicas) : Live(b)

(* ReassignmentCompletes: a requested reassignment eventually completes (the assignment is the
   target) while its brokers (the current and the target replicas) live; a request for a topic
   being deleted is dropped instead. *)
ReassignmentCompletes ==
    \A p \in Partitions, t \in ReassignTargets, k \in Faults :
        (reassign_req[p] = t /\ AllLive(assignment[p] \o t) /\ FaultCount = k)
            ~> (assignment[p] \in {t, <<>>} \/ p \in delete_req \/ FaultCount # k)

(* TopicDeletionCompletes: a requested topic deletion eventually completes (the topic leaves the
   store) while its brokers live (a replica that is down makes the deletion ineligible until the
   broker comes back: Kafka 2.3's TopicDeletionManager). *)
TopicDeletionCompletes ==
    \A p \in Partitions, k \in Faults :
        (p \in delete_req /\ AllLive(assignment[p]) /\ FaultCount = k) ~> (assignment[p] = <<>> \/ FaultCount # k)
=============================================================================
