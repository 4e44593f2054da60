------------------------------ MODULE TraceKafkaOps ------------------------------
(***************************************************************************************)
(* Trace validation of traces with operator commands: TraceKafka's matching over the   *)
(* specification with the controller's operations (KafkaControllerOps): controlled      *)
(* shutdown, preferred elections, reassignment, topic deletion and StopReplica.  A      *)
(* controller event of the core is matched by its operation-aware version, and every    *)
(* core step keeps the operation variables (CoreStep).  The constant ReassignTargets    *)
(* holds the targets the trace's operators request.                                     *)
(***************************************************************************************)
EXTENDS TraceKafka, KafkaControllerOps

\* The actions an event may be, by the name the trace gives it (`a`: the actor's id).  The
\* implementation's PartitionModifications (new partitions of a topic, or the topic node
\* rewritten by a reassignment) is the model's TopicChange; CreatePartitions its CreateTopic.
OpsSpecAction(name, a) ==
    CASE name = "ControllerElect" -> a \in Brokers /\ (OpsControllerElect(a) \/ CoreStep(ControllerResign(a)))
      [] name = "ControllerResign" -> a \in Brokers /\ CoreStep(ControllerResign(a))
      [] name = "BrokerReregister" -> a \in Brokers /\ OpsBrokerReregister(a)
      [] name = "BrokerChange" -> a \in Brokers /\ OpsBrokerChange(a)
      [] name \in {"TopicChange", "PartitionModifications"} -> a \in Brokers /\ OpsTopicChange(a)
      [] name = "IsrChangeNotification" -> a \in Brokers /\ CoreStep(IsrChangeNotification(a))
      [] name \in {"CreateTopic", "CreatePartitions"} -> \E p \in Partitions : OpsCreateTopic(p)
      [] name = "BrokerRestart" -> \E b \in Brokers : OpsBrokerRestart(b)
      [] name = "ControlledShutdownRequest" -> a \in Brokers /\ ControlledShutdownRequest(a)
      [] name = "PreferredReplicaElection" -> a \in Brokers /\ PreferredReplicaElection(a)
      [] name = "AutoPreferredReplicaElection" -> a \in Brokers /\ AutoPreferredReplicaElection(a)
      [] name = "PartitionReassignment" -> a \in Brokers /\ PartitionReassignment(a)
      [] name = "ReassignmentIsrChange" -> a \in Brokers /\ ReassignmentIsrChange(a)
      [] name = "TopicDeletion" -> a \in Brokers /\ TopicDeletion(a)
      [] name = "StopReplicaResponse" -> a \in Brokers /\ StopReplicaResponse(a)
      [] name = "StopReplica" -> a \in Brokers /\ StopReplica(a)
      [] name = "RequestControlledShutdown" -> a \in Brokers /\ RequestControlledShutdown(a)
      [] name = "ControlledShutdownResponse" -> a \in Brokers /\ ControlledShutdownResponse(a)
      [] name = "ReassignPartitions" -> \E p \in Partitions, t \in ReassignTargets : ReassignPartitions(p, t)
      [] name = "PreferredElection" -> \E S \in SUBSET Partitions : PreferredElection(S)
      [] name = "DeleteTopic" -> \E p \in Partitions : DeleteTopic(p)
      [] OTHER -> CoreStep(SpecAction(name, a))

OpsTraceInit ==
    /\ l = 1
    /\ OpsInitEmpty
    /\ Matches(1)

OpsTraceNext == MatchNext(OpsSpecAction, all_vars)
=============================================================================
