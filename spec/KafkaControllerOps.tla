----------------------------- MODULE KafkaControllerOps -----------------------------
(***************************************************************************************)
(* The controller's operations on top of the core (KafkaReplication): controlled        *)
(* shutdown, preferred leader election (requested and automatic), partition             *)
(* reassignment and topic deletion, with the partition and replica state machines of    *)
(* Kafka 2.3 (impl/controller.py, impl/topic_deletion.py).  Each partition is its own   *)
(* topic here (deleting a topic deletes its one partition).                             *)
(*                                                                                     *)
(* The core's controller events are replaced by operation-aware versions (OpsBrokerChange*)
(* and OpsControllerElect / OpsBrokerReregister: failover resumes reassignments,        *)
(* deletions and preferred elections); the broker side gains StopReplica and controlled *)
(* shutdown.  Abstractions: the admin nodes hold at most one request per partition;     *)
(* operation events are handled only by a controller in office (a zombie controller's   *)
(* leftover events are those of the core: BrokerChange, TopicChange,                    *)
(* IsrChangeNotification); every event sends its requests when it completes.           *)
(***************************************************************************************)
EXTENDS KafkaReplication

CONSTANT ReassignTargets    \* the targets an operator may request, e.g. {<<2, 3>>}

VARIABLES
    reassign_req,        \* [Partitions -> Seq(Brokers)]: /admin/reassign_partitions (<<>> = no entry)
    preferred_req,       \* SUBSET Partitions: /admin/preferred_replica_election
    delete_req,          \* SUBSET Partitions: /admin/delete_topics children
    ctl_shutting,        \* [Brokers -> SUBSET Brokers]: context's shutting-down brokers
    ctl_reassign,        \* [Brokers -> [Partitions -> Seq(Brokers)]]: context's reassignments in progress
    ctl_deleting,        \* [Brokers -> SUBSET Partitions]: context's topics to delete
    ctl_ineligible,      \* [Brokers -> SUBSET Partitions]: context's topics whose deletion is ineligible
    cs_requested         \* [Brokers -> BOOLEAN]: the broker has asked for a controlled shutdown

admin_vars == <<reassign_req, preferred_req, delete_req>>
opsctx_vars == <<ctl_shutting, ctl_reassign, ctl_deleting, ctl_ineligible>>
ops_vars == <<admin_vars, opsctx_vars, cs_requested>>
all_vars == <<vars, ops_vars>>

OpsInit ==
    /\ reassign_req = [p \in Partitions |-> <<>>]
    /\ preferred_req = {}
    /\ delete_req = {}
    /\ ctl_shutting = [b \in Brokers |-> {}]
    /\ ctl_reassign = [b \in Brokers |-> [p \in Partitions |-> <<>>]]
    /\ ctl_deleting = [b \in Brokers |-> {}]
    /\ ctl_ineligible = [b \in Brokers |-> {}]
    /\ cs_requested = [b \in Brokers |-> FALSE]

OpsInitEmpty == InitEmpty /\ OpsInit
OpsInitStable == InitStable /\ OpsInit

\* A controller that resigned (or crashed) in a core step loses its operation context too.
OpsCtxFollows ==
    /\ ctl_shutting' = [c \in Brokers |-> IF acting_controller_epoch'[c] = 0 THEN {} ELSE ctl_shutting[c]]
    /\ ctl_reassign' = [c \in Brokers |-> IF acting_controller_epoch'[c] = 0 THEN [p \in Partitions |-> <<>>] ELSE ctl_reassign[c]]
    /\ ctl_deleting' = [c \in Brokers |-> IF acting_controller_epoch'[c] = 0 THEN {} ELSE ctl_deleting[c]]
    /\ ctl_ineligible' = [c \in Brokers |-> IF acting_controller_epoch'[c] = 0 THEN {} ELSE ctl_ineligible[c]]

(***************************************************************************************)
(* Per-partition operation steps on the core's working record W.                        *)
(***************************************************************************************)
OpsWork(c, p) ==
    [Work(c, p) EXCEPT !.del = p \in ctl_deleting[c], !.inel = p \in ctl_ineligible[c], !.tgt = ctl_reassign[c][p]]

SetOf(seq) == Range(seq)

\* _bump_leader_epoch: same leader and ISR, epoch + 1, LeaderAndIsr to `recipients`; a stale
\* cached version only refreshes the cache.
BumpLeaderEpoch(W, recipients, K) ==
    IF ~HasNode(W.cache) THEN W
    ELSE IF W.cache.version # W.node.version THEN [W EXCEPT !.cache = W.node]
    ELSE AddLai(WriteNode(W, W.cache, W.cache.leader, W.cache.isr, K), recipients, K)

\* The topic-deletion manager, for a partition-topic.
DeletionFail(W, rs, K) ==
    IF rs = {} THEN W ELSE [RsmAll(W, rs, "ReplicaDeletionIneligible", K) EXCEPT !.inel = TRUE]

StartDeletion(W, K) ==
    LET W1 == IF W.ps # "OfflinePartition" THEN PsmTo(W, "OfflinePartition") ELSE W
        pending == {r \in SetOf(W1.asg) : W1.rs[r] # "ReplicaDeletionSuccessful"}
        dead == pending \ LiveOf(K)
        up == pending \cap LiveOf(K)
        W2 == DeletionFail(W1, {r \in dead : W1.rs[r] # "ReplicaDeletionIneligible"}, K)
        W3 == IF dead # {} THEN [W2 EXCEPT !.inel = TRUE] ELSE W2
    IN RsmAll(RsmAll(W3, up, "OfflineReplica", K), up, "ReplicaDeletionStarted", K)

\* Every replica deleted: the replicas and the partition leave the state machines, the topic, its
\* state node and its deletion request leave the store (one fenced multi-op), and the context.
CompleteDeletion(W, K) ==
    LET W1 == PsmTo(RsmAll(W, SetOf(W.asg), "NonExistentReplica", K), "NonExistentPartition")
    IN [W1 EXCEPT !.asg = <<>>, !.asgw = TRUE, !.node = NoNode, !.cache = NoNode, !.wrote = TRUE,
                  !.ps = "NonExistentPartition", !.rs = [r \in Brokers |-> "NonExistentReplica"],
                  !.del = FALSE, !.inel = FALSE, !.tgt = <<>>]

DeletionResume(W, K) ==
    IF ~W.del THEN W
    ELSE IF W.asg # <<>> /\ \A r \in SetOf(W.asg) : W.rs[r] = "ReplicaDeletionSuccessful" THEN CompleteDeletion(W, K)
    ELSE IF ~W.inel /\ ~\E r \in SetOf(W.asg) : W.rs[r] = "ReplicaDeletionStarted" THEN StartDeletion(W, K)
    ELSE W

DeletionRetry(W, K) ==
    IF ~W.del THEN W ELSE DeletionResume(IF W.tgt = <<>> THEN [W EXCEPT !.inel = FALSE] ELSE W, K)

\* _reassign, Kafka 2.3.0 KafkaController.onPartitionReassignment (core/src/main/scala/kafka/controller/
\* KafkaController.scala; RAR = target, OAR = the assignment before).  The partition node is read first
\* (areReplicasInIsr reads ZooKeeper, not the cache).  While RAR is not in the ISR, at every call
\* (a request, a broker of RAR starting, a failover): step 1 AR := RAR ++ (OAR - RAR) in the store
\* ((RAR ++ OAR).toSet in 2.3.0, insertion-ordered for lists this short; .distinct in 2.4.0
\* ReplicaAssignment.fromOldAndNewReplicas), step 2 a new leader epoch with LeaderAndIsr to all of AR,
\* step 3 RAR - OAR -> NewReplica.  Once RAR is in the ISR: step 5 RAR -> OnlineReplica, step 6
\* AR := RAR in the context, step 7 leadership into RAR with the ISR kept (an election, its request to
\* RAR; or, the leader in RAR and alive, a new epoch with LeaderAndIsr to OAR + RAR), so RAR's
\* replicas get an ISR that holds OAR - RAR while their AR is RAR; step 8 OAR - RAR -> OfflineReplica
\* (each leaves the ISR in the store, LeaderAndIsr to AR); step 9 -> NonExistentReplica; step 10
\* AR := RAR in the store, last.  Each state-machine call sends what it collected (Seal).
Reassign(W0, K) ==
    LET W == IF HasNode(W0.node) THEN [W0 EXCEPT !.cache = W0.node] ELSE W0
        target == W.tgt
        current == W.asg
    IN IF target = <<>> \/ ~HasNode(W.cache) THEN W
       ELSE IF ~(SetOf(target) \subseteq W.cache.isr)
       THEN LET added == SelectSeq(target, LAMBDA r : r \notin SetOf(current))
                grown == target \o SelectSeq(current, LAMBDA r : r \notin SetOf(target))
                W1 == [W EXCEPT !.asg = grown, !.asgw = TRUE, !.wrote = TRUE]
            IN RsmAll(Seal(BumpLeaderEpoch(W1, SetOf(grown), K)), SetOf(added), "NewReplica", K)
       ELSE LET retired == SetOf(current) \ SetOf(target)
                W1 == [Seal(RsmAll(W, SetOf(target), "OnlineReplica", K)) EXCEPT !.asg = target]
                W2 == IF W1.cache.leader \notin SetOf(target) \/ W1.cache.leader \notin LiveOf(K)
                      THEN PsmOnline(W1, "reassign", target, K)
                      ELSE BumpLeaderEpoch(W1, SetOf(current), K)
                W3 == RsmAll(Seal(W2), retired, "OfflineReplica", K)
                W4 == RsmAll(W3, retired, "ReplicaDeletionStarted", K)
                W5 == RsmAll(W4, retired, "ReplicaDeletionSuccessful", K)
                W6 == RsmAll(W5, retired, "NonExistentReplica", K)
                W7 == [W6 EXCEPT !.asg = target, !.asgw = TRUE, !.wrote = TRUE, !.tgt = <<>>]
            IN DeletionRetry(W7, K)

\* _elect_preferred for one partition.
ElectPreferred(W, K) ==
    IF ~W.del /\ W.tgt = <<>> /\ HasNode(W.cache) /\ W.asg # <<>> /\ W.cache.leader # W.asg[1]
    THEN PsmOnline(W, "preferred", <<>>, K)
    ELSE W

\* Startup with the operation hooks (_on_broker_startup).
OpsStartup(W, brokers, K) ==
    LET W1 == Startup(W, brokers, K)
        on == SetOf(W1.asg) \cap brokers # {}
        \* 2.3.0 onBrokerStartup: a reassignment resumes when a broker of its target starts.
        W2 == IF SetOf(W1.tgt) \cap brokers # {} THEN Reassign(W1, K) ELSE W1
    IN IF W2.del /\ on THEN DeletionRetry(W2, K) ELSE W2

\* Commit an operation event: the core's effects plus the operation context and admin nodes.
\* `adminWrite`: the event also wrote an admin node (fenced as every controller write).
OpsAborted(c, Wf, adminWrite) ==
    /\ (adminWrite \/ \E p \in Partitions : Wf[p].wrote)
    /\ acting_controller_epoch[c] # controller_epoch
    /\ FencesControllerWrites

OpsCtxOf(c, K, Wf) ==
    /\ ctl_shutting' = [ctl_shutting EXCEPT ![c] = K.shutting]
    /\ ctl_reassign' = [ctl_reassign EXCEPT ![c] = [p \in Partitions |-> Wf[p].tgt]]
    /\ ctl_deleting' = [ctl_deleting EXCEPT ![c] = {p \in Partitions : Wf[p].del}]
    /\ ctl_ineligible' = [ctl_ineligible EXCEPT ![c] = {p \in Partitions : Wf[p].inel}]

\* Admin nodes after an event: finished or rejected reassignments and completed deletions leave.
AdminAfter(c, Wf, forget, preferredDone, dropDel) ==
    /\ reassign_req' = [p \in Partitions |->
                          IF p \in forget \/ (ctl_reassign[c][p] # <<>> /\ Wf[p].tgt = <<>>)
                             \/ (reassign_req[p] # <<>> /\ Wf[p].tgt = <<>> /\ Wf[p].asgw)
                          THEN <<>> ELSE reassign_req[p]]
    /\ preferred_req' = IF preferredDone THEN {} ELSE preferred_req
    /\ delete_req' = {p \in delete_req : ~(Wf[p].asgw /\ Wf[p].asg = <<>>) /\ p \notin dropDel}

OpsCommitX(c, K, Wf, forget, preferredDone, dropDel, consumed, extraMsgs, kind) ==
    LET adminWrite == forget # {} \/ preferredDone \/ dropDel # {}
        deposed == acting_controller_epoch[c] # controller_epoch
    IN IF OpsAborted(c, Wf, adminWrite)
       THEN /\ ResignVars(c)
            /\ ctl_shutting' = [ctl_shutting EXCEPT ![c] = {}]
            /\ ctl_reassign' = [ctl_reassign EXCEPT ![c] = [p \in Partitions |-> <<>>]]
            /\ ctl_deleting' = [ctl_deleting EXCEPT ![c] = {}]
            /\ ctl_ineligible' = [ctl_ineligible EXCEPT ![c] = {}]
            /\ ctl_msgs' = ctl_msgs \ consumed
            /\ UNCHANGED <<store_vars, h_flags, admin_vars>>
       ELSE /\ ApplyEventFrom(c, K, Wf, deposed /\ ~FencesControllerWrites /\ (adminWrite \/ \E p \in Partitions : Wf[p].wrote),
                              ctl_msgs \ consumed, extraMsgs)
            /\ IF kind \in EventKinds THEN TakeEvent(c, kind) ELSE UNCHANGED zombie_events
            /\ OpsCtxOf(c, K, Wf)
            /\ AdminAfter(c, Wf, forget, preferredDone, dropDel)
            /\ UNCHANGED <<controller, controller_epoch, registered, acting_controller_epoch>>

OpsCommit(c, K, Wf, forget, preferredDone, consumed, extraMsgs, kind) ==
    OpsCommitX(c, K, Wf, forget, preferredDone, {}, consumed, extraMsgs, kind)

\* A controller in office with its context.
InOffice(c) == alive[c] /\ acting_controller_epoch[c] # 0 /\ ~reregister[c]
OpsCtx(c, live, shutting) == Ctx(live, shutting, acting_controller_epoch[c])

(***************************************************************************************)
(* Controller actions with operations.                                                  *)
(***************************************************************************************)

(* OpsControllerElect(b) / failover -- actor broker:b.  As ControllerElect, and the failover also
   loads the topics to delete (one with a replica on a dead broker ineligible: Kafka 2.3.0
   KafkaController.scala, fetchTopicDeletionsInProgress), resumes a requested reassignment, resumes
   deletions and runs a requested preferred election. *)
OpsFailoverWork(K) ==
    LET One(p) ==
            IF assignment[p] = <<>>
            THEN [Work(CtlId, p) EXCEPT !.cache = NoNode, !.ps = "NonExistentPartition",
                                        !.rs = [r \in Brokers |-> "NonExistentReplica"]]
            ELSE LET del == p \in delete_req
                     L == LoadWork(p, K)
                     W0 == [L EXCEPT !.del = del, !.inel = del /\ ~(SetOf(L.asg) \subseteq LiveOf(K))]
                     W2 == TriggerOnline(Seal(LoadStartup(W0, K)), K)
                     req == reassign_req[p]
                     W3 == IF req = <<>> \/ del \/ req = W2.asg THEN W2 ELSE Reassign([W2 EXCEPT !.tgt = req], K)
                     W4 == DeletionResume(W3, K)
                 IN IF p \in preferred_req THEN ElectPreferred(W4, K) ELSE W4
    IN TLCEval([p \in Partitions |-> One(p)])

OpsElected(b, live) ==
    LET K == Ctx(live, {}, controller_epoch + 1)
        Wf == OpsFailoverWork(K)
        rejected == {p \in Partitions : reassign_req[p] # <<>> /\ (assignment[p] = <<>> \/ p \in delete_req
                                                                 \/ reassign_req[p] = assignment[p])}
    IN /\ controller' = b
       /\ controller_epoch' = K.ce
       /\ acting_controller_epoch' = [acting_controller_epoch EXCEPT ![b] = K.ce]
       /\ zombie_events' = [zombie_events EXCEPT ![b] = {}]
       /\ ApplyEvent(b, K, Wf, FALSE)
       /\ OpsCtxOf(b, K, Wf)
       /\ reassign_req' = [p \in Partitions |-> IF p \in rejected \/ (reassign_req[p] # <<>> /\ Wf[p].tgt = <<>>)
                                                THEN <<>> ELSE reassign_req[p]]
       /\ preferred_req' = {}
       /\ delete_req' = {p \in delete_req : ~(Wf[p].asgw /\ Wf[p].asg = <<>>)}

OpsControllerElect(b) ==
    /\ alive[b]
    /\ controller = NoLeader
    /\ controller_epoch < MaxControllerEpoch
    /\ OpsElected(b, registered)
    /\ UNCHANGED <<registered, broker_vars, replica_vars, msgs, bound_vars, cs_requested>>
    /\ HistoryNext

OpsBrokerReregister(b) ==
    /\ alive[b]
    /\ reregister[b]
    /\ reregister' = [reregister EXCEPT ![b] = FALSE]
    /\ LET live == [registered EXCEPT ![b] = session[b]]
       IN /\ registered' = live
          /\ broker_epoch' = [broker_epoch EXCEPT ![b] = session[b]]
          /\ IF controller = NoLeader /\ controller_epoch < MaxControllerEpoch
             THEN OpsElected(b, live)
             ELSE IF controller = b
             THEN UNCHANGED <<ctl_vars, opsctx_vars, controller, controller_epoch, assignment, leader, leader_epoch,
                              isr, partition_controller_epoch, partition_version, ctl_msgs, h_flags, admin_vars>>
             ELSE /\ ResignVars(b)
                  /\ ctl_shutting' = [ctl_shutting EXCEPT ![b] = {}]
                  /\ ctl_reassign' = [ctl_reassign EXCEPT ![b] = [p \in Partitions |-> <<>>]]
                  /\ ctl_deleting' = [ctl_deleting EXCEPT ![b] = {}]
                  /\ ctl_ineligible' = [ctl_ineligible EXCEPT ![b] = {}]
                  /\ UNCHANGED <<controller, controller_epoch, assignment, leader, leader_epoch, isr,
                                 partition_controller_epoch, partition_version, ctl_msgs, h_flags, admin_vars>>
    /\ UNCHANGED <<alive, session, broker_controller_epoch, replica_vars, msgs, bound_vars, cs_requested>>
    /\ HistoryNext

(* OpsBrokerChange(c) -- actor controller:c.  BrokerChange with the operation hooks: starting
   brokers resume the reassignments and retry the deletions that involve them; failing brokers'
   replicas of topics being deleted become ReplicaDeletionIneligible; dead or bounced brokers
   leave the shutting-down set. *)
OpsBrokerChange(c) ==
    /\ CanHandle(c, "BrokerChange")
    /\ LET old == ctl_live[c]
           live == registered
           new == NewBrokers(old, live)
           dead == DeadBrokers(old, live)
           bounced == BouncedBrokers(old, live)
           K == OpsCtx(c, live, ctl_shutting[c] \ (dead \cup bounced))
           One(p) ==
               LET W0 == OpsWork(c, p)
                   W1 == IF new # {} THEN OpsStartup(W0, new, K) ELSE W0
                   W2 == IF bounced # {} THEN OpsStartup(Failure(W1, bounced, Without(K, bounced)), bounced, K) ELSE W1
                   W3 == IF dead # {} THEN Failure(W2, dead, K) ELSE W2
               IN IF Known(c, p) THEN W3 ELSE W0
           Wf == TLCEval([p \in Partitions |-> One(p)])
       IN OpsCommit(c, K, Wf, {}, FALSE, RemovedQueues(c, dead), {}, "BrokerChange")
    /\ UNCHANGED <<broker_vars, replica_vars, msgs, bound_vars, cs_requested>>
    /\ HistoryNext

(* OpsTopicChange(c): TopicChange (new partitions), keeping the operation context. *)
OpsTopicChange(c) ==
    /\ CanHandle(c, "TopicChange")
    /\ LET K == OpsCtx(c, ctl_live[c], ctl_shutting[c])
           Wf0 == TopicChangeWork(c, K)
           Wf == [p \in Partitions |-> [Wf0[p] EXCEPT !.del = p \in ctl_deleting[c], !.inel = p \in ctl_ineligible[c],
                                                      !.tgt = ctl_reassign[c][p]]]
       IN OpsCommit(c, K, Wf, {}, FALSE, {}, {}, "TopicChange")
    /\ UNCHANGED <<broker_vars, replica_vars, msgs, bound_vars, cs_requested>>
    /\ HistoryNext

(* ControlledShutdownRequest(c) -- actor controller:c.
   When: a ControlledShutdownRequest from broker b is in flight to c, c in office.
   Does: b joins the shutting-down set; partitions b leads (with more than one replica, not being
   deleted) elect a new leader with the controlled-shutdown selector (first live ISR replica not
   shutting down; shutting-down brokers leave the ISR); b's other replicas go Offline (StopReplica,
   ISR removal).  Replies with the partitions b still leads. *)
ControlledShutdownRequest(c) ==
    \E m \in ctl_msgs :
    /\ m.type = "ControlledShutdownRequest"
    /\ m.dst = c
    /\ InOffice(c)
    /\ LET b == m.src
           isLive == ctl_live[c][b] # 0
           K == OpsCtx(c, ctl_live[c], IF isLive THEN ctl_shutting[c] \cup {b} ELSE ctl_shutting[c])
           shared(p) == Known(c, p) /\ b \in SetOf(OpsWork(c, p).asg) /\ Len(OpsWork(c, p).asg) > 1 /\ ~OpsWork(c, p).del
           One(p) ==
               LET W0 == OpsWork(c, p)
               IN IF ~isLive \/ ~shared(p) THEN W0
                  ELSE IF HasNode(W0.cache) /\ W0.cache.leader = b
                       THEN PsmOnline(W0, "controlled_shutdown", <<>>, K)
                       ELSE RsmTo(W0, b, "OfflineReplica", K)
           Wf == TLCEval([p \in Partitions |-> One(p)])
           remaining == IF ~isLive THEN {p \in Partitions : Known(c, p)}
                        ELSE {p \in Partitions : shared(p) /\ Wf[p].cache.leader = b}
           reply == [CtlMsg("ControlledShutdownResponse", c, b, acting_controller_epoch[c], CHOOSE q \in Partitions : TRUE,
                            NoNode, <<>>, FALSE) EXCEPT !.parts = remaining]
       IN OpsCommit(c, K, Wf, {}, FALSE, {m}, IF alive[b] THEN {reply} ELSE {}, "ControlledShutdownRequest")
    /\ UNCHANGED <<broker_vars, replica_vars, msgs, bound_vars, cs_requested>>
    /\ HistoryNext

(* PreferredReplicaElection(c) -- actor controller:c.
   When: /admin/preferred_replica_election exists and c is in office.
   Does: for each listed partition (not being deleted or reassigned, led by another broker than its
   preferred replica) the preferred selector: the first assigned replica, if live and in the ISR;
   then deletes the admin node (a fenced write). *)
PreferredReplicaElection(c) ==
    /\ InOffice(c)
    /\ preferred_req # {}
    /\ LET K == OpsCtx(c, ctl_live[c], ctl_shutting[c])
           Wf == TLCEval([p \in Partitions |->
                   IF p \in preferred_req /\ Known(c, p) THEN ElectPreferred(OpsWork(c, p), K) ELSE OpsWork(c, p)])
       IN OpsCommit(c, K, Wf, {}, TRUE, {}, {}, "PreferredReplicaElection")
    /\ UNCHANGED <<broker_vars, replica_vars, msgs, bound_vars, cs_requested>>
    /\ HistoryNext

(* AutoPreferredReplicaElection(c) -- actor controller:c (after a rebalance Tick).
   When: c is in office and some partition whose preferred replica is live is led by another broker
   (one partition per preferred broker here, so the imbalance ratio exceeds 10%).
   Does: the preferred election for those partitions. *)
AutoPreferredReplicaElection(c) ==
    /\ InOffice(c)
    /\ LET K == OpsCtx(c, ctl_live[c], ctl_shutting[c])
           chosen(p) == LET W == OpsWork(c, p)
                        IN Known(c, p) /\ W.asg # <<>> /\ W.asg[1] \in LiveOf(K) /\ HasNode(W.cache)
                           /\ W.cache.leader # W.asg[1]
           Wf == TLCEval([p \in Partitions |-> IF chosen(p) THEN ElectPreferred(OpsWork(c, p), K) ELSE OpsWork(c, p)])
       IN /\ \E p \in Partitions : chosen(p)
          /\ OpsCommit(c, K, Wf, {}, FALSE, {}, {}, "AutoPreferredReplicaElection")
    /\ UNCHANGED <<broker_vars, replica_vars, msgs, bound_vars, cs_requested>>
    /\ HistoryNext

(* PartitionReassignment(c) -- actor controller:c.
   When: /admin/reassign_partitions lists a partition c is not reassigning yet, c in office.
   Does: a request for an unknown partition, one being deleted, or one already at its target is
   dropped from the admin node; otherwise c records the target, refreshes the partition node and
   runs the reassignment procedure (Reassign). *)
PartitionReassignment(c) ==
    /\ InOffice(c)
    /\ \E p \in Partitions : reassign_req[p] # <<>> /\ ctl_reassign[c][p] = <<>>
    /\ LET K == OpsCtx(c, ctl_live[c], ctl_shutting[c])
           new(p) == reassign_req[p] # <<>> /\ ctl_reassign[c][p] = <<>>
           reject(p) == new(p) /\ (~Known(c, p) \/ p \in ctl_deleting[c] \/ reassign_req[p] = OpsWork(c, p).asg)
           One(p) ==
               IF new(p) /\ ~reject(p)
               THEN Reassign([OpsWork(c, p) EXCEPT !.tgt = reassign_req[p], !.cache = StoreNode(p)], K)
               ELSE OpsWork(c, p)
           Wf == TLCEval([p \in Partitions |-> One(p)])
       IN OpsCommit(c, K, Wf, {p \in Partitions : reject(p)}, FALSE, {}, {}, "PartitionReassignment")
    /\ UNCHANGED <<broker_vars, replica_vars, msgs, bound_vars, cs_requested>>
    /\ HistoryNext

(* ReassignmentIsrChange(c) -- actor controller:c.
   When: the state node of a partition c is reassigning changed (its cached copy is stale, or the
   target replicas are all in the ISR: the watch event may come after an ISR change notification
   refreshed the cache).
   Does: refresh the cached node; continue the reassignment procedure only if the target replicas
   are all in the store's ISR (2.3.0 processPartitionReassignmentIsrChange). *)
Progress(c, p) ==
    /\ ctl_reassign[c][p] # <<>>
    /\ \/ ctl_cache[c][p] # StoreNode(p)
       \/ HasNode(StoreNode(p)) /\ SetOf(ctl_reassign[c][p]) \subseteq isr[p]

ReassignmentIsrChange(c) ==
    /\ InOffice(c)
    /\ \E p \in Partitions : Progress(c, p)
    /\ LET K == OpsCtx(c, ctl_live[c], ctl_shutting[c])
           One(p) ==
               IF ~Progress(c, p) THEN OpsWork(c, p)
               ELSE IF HasNode(StoreNode(p)) /\ SetOf(ctl_reassign[c][p]) \subseteq isr[p]
               THEN Reassign([OpsWork(c, p) EXCEPT !.cache = StoreNode(p)], K)
               ELSE [OpsWork(c, p) EXCEPT !.cache = StoreNode(p)]
           Wf == TLCEval([p \in Partitions |-> One(p)])
       IN OpsCommit(c, K, Wf, {}, FALSE, {}, {}, "ReassignmentIsrChange")
    /\ UNCHANGED <<broker_vars, replica_vars, msgs, bound_vars, cs_requested>>
    /\ HistoryNext

(* TopicDeletion(c) -- actor controller:c.
   When: /admin/delete_topics lists a topic c does not delete yet, c in office.
   Does: a request for an unknown topic is dropped (admin node deleted: a fenced write); otherwise
   the topic is marked for deletion (ineligible while it is being reassigned) and the deletion
   resumes: the partition goes Offline, live replicas Offline then ReplicaDeletionStarted
   (StopReplica with delete), dead replicas ReplicaDeletionIneligible. *)
TopicDeletion(c) ==
    /\ InOffice(c)
    /\ \E p \in delete_req : p \notin ctl_deleting[c]
    /\ LET K == OpsCtx(c, ctl_live[c], ctl_shutting[c])
           new(p) == p \in delete_req /\ p \notin ctl_deleting[c]
           unknown(p) == new(p) /\ ~Known(c, p)
           One(p) ==
               LET W == OpsWork(c, p)
               IN IF new(p) /\ ~unknown(p)
                  THEN DeletionResume([W EXCEPT !.del = TRUE, !.inel = W.inel \/ W.tgt # <<>>], K)
                  ELSE IF W.del THEN DeletionResume(W, K) ELSE W
           Wf == TLCEval([p \in Partitions |-> One(p)])
           dropped == {p \in Partitions : unknown(p)}
       IN OpsCommitX(c, K, Wf, {}, FALSE, dropped, {}, {}, "TopicDeletion")
    /\ UNCHANGED <<broker_vars, replica_vars, msgs, bound_vars, cs_requested>>
    /\ HistoryNext

(* StopReplicaResponse(c) -- actor controller:c.
   When: a StopReplicaResponse to c is in flight.
   Does: ignored unless c is in office, it answers a deletion and carries c's epoch; a replica in
   ReplicaDeletionStarted becomes ReplicaDeletionSuccessful (or ReplicaDeletionIneligible on an
   error) and the deletion resumes (completing it when every replica is deleted). *)
StopReplicaResponse(c) ==
    \E m \in ctl_msgs :
    /\ m.type = "StopReplicaResponse"
    /\ m.dst = c
    /\ alive[c]
    /\ IF ~InOffice(c) \/ ~m.delete \/ m.ce # acting_controller_epoch[c]
       THEN /\ ctl_msgs' = ctl_msgs \ {m}
            /\ UNCHANGED <<store_vars, ctl_vars, admin_vars, opsctx_vars, h_flags>>
       ELSE LET K == OpsCtx(c, ctl_live[c], ctl_shutting[c])
                b == m.src
                One(p) ==
                    LET W == OpsWork(c, p)
                    IN IF p # m.p \/ ~W.del THEN W
                       ELSE IF W.rs[b] # "ReplicaDeletionStarted" THEN DeletionResume(W, K)
                       ELSE IF m.err # "" THEN DeletionResume(DeletionFail(W, {b}, K), K)
                       ELSE DeletionResume(RsmTo(W, b, "ReplicaDeletionSuccessful", K), K)
                Wf == TLCEval([p \in Partitions |-> One(p)])
            IN OpsCommit(c, K, Wf, {}, FALSE, {m}, {}, "StopReplicaResponse")
    /\ UNCHANGED <<broker_vars, replica_vars, msgs, bound_vars, cs_requested>>
    /\ HistoryNext

(***************************************************************************************)
(* Brokers and operators.                                                               *)
(***************************************************************************************)

(* StopReplica(b) -- actor broker:b.
   When: a StopReplica request for b is in flight.
   Does: with BrokerEpochFencing, a request addressed to an earlier registration of b is refused whole (b
   answers STALE_BROKER_EPOCH, 2.2.0 KafkaApis.scala handleStopReplicaRequest).  The controller-epoch fence as for LeaderAndIsr; if accepted the replica stops (no role)
   or, with delete, is removed with its log and checkpoint.  b answers StopReplicaResponse (with
   STALE_CONTROLLER_EPOCH if fenced). *)
StopReplica(b) ==
    \E m \in ctl_msgs :
    /\ m.type = "StopReplica"
    /\ m.dst = b
    /\ alive[b]
    /\ LET p == m.p
           refused == StaleBrokerEpoch(b, m)
           fenced == RefusesControllerEpoch(m.ce, broker_controller_epoch[b])
           reply == [CtlMsg("StopReplicaResponse", b, m.src, m.ce, p, NoNode, <<>>, m.delete)
                       EXCEPT !.err = IF refused THEN "STALE_BROKER_EPOCH"
                                      ELSE IF fenced THEN "STALE_CONTROLLER_EPOCH" ELSE ""]
           exists == role[b][p] # "absent"
       IN /\ ctl_msgs' = (ctl_msgs \ {m}) \cup (IF alive[m.src] THEN {reply} ELSE {})
          /\ broker_controller_epoch' = IF refused \/ fenced THEN broker_controller_epoch
                                        ELSE [broker_controller_epoch EXCEPT ![b] = Max(@, m.ce)]
          /\ h_flags' = [h_flags EXCEPT !.stale = @ \/ (~refused /\ ~fenced /\ m.ce < broker_controller_epoch[b])]
          /\ IF refused \/ fenced \/ ~exists
             THEN UNCHANGED replica_vars
             ELSE IF m.delete
             THEN /\ role' = [role EXCEPT ![b][p] = "absent"]
                  /\ local_leader_epoch' = [local_leader_epoch EXCEPT ![b][p] = -1]
                  /\ local_leader' = [local_leader EXCEPT ![b][p] = NoLeader]
                  /\ local_isr' = [local_isr EXCEPT ![b][p] = {}]
                  /\ local_version' = [local_version EXCEPT ![b][p] = -1]
                  /\ log' = [log EXCEPT ![b][p] = <<>>]
                  /\ hw' = [hw EXCEPT ![b][p] = 0]
                  /\ hw_checkpoint' = [hw_checkpoint EXCEPT ![b][p] = 0]
                  /\ epoch_start_offset' = [epoch_start_offset EXCEPT ![b][p] = 0]
                  /\ follower_leo' = [follower_leo EXCEPT ![b][p] = [f \in Brokers |-> -2]]
                  /\ truncating' = [truncating EXCEPT ![b][p] = FALSE]
                  /\ inflight' = [inflight EXCEPT ![b][p] = FALSE]
             ELSE /\ role' = [role EXCEPT ![b][p] = "none"]
                  /\ local_isr' = [local_isr EXCEPT ![b][p] = {}]
                  /\ epoch_start_offset' = [epoch_start_offset EXCEPT ![b][p] = 0]
                  /\ follower_leo' = [follower_leo EXCEPT ![b][p] = [f \in Brokers |-> -2]]
                  /\ local_version' = [local_version EXCEPT ![b][p] = -1]
                  /\ truncating' = [truncating EXCEPT ![b][p] = FALSE]
                  /\ inflight' = [inflight EXCEPT ![b][p] = FALSE]
                  /\ UNCHANGED <<local_leader_epoch, local_leader, log, hw, hw_checkpoint>>
    /\ UNCHANGED <<store_vars, ctl_vars, alive, session, reregister, broker_epoch, msgs, bound_vars, ops_vars>>
    /\ HistoryNext

\* A request of b's controlled shutdown, or its answer, is in flight.
ShutdownInFlight(b) ==
    \E m \in ctl_msgs : m.type \in {"ControlledShutdownRequest", "ControlledShutdownResponse"} /\ b \in {m.src, m.dst}

(* RequestControlledShutdown(b) -- actor broker:b.
   When: b is up, /controller names a controller, and b has not asked yet, or asked and has no attempt
   in flight any more (refused, or the request or its answer lost): Kafka 2.3.0's broker tries again
   (KafkaServer.scala doControlledShutdown, controlled.shutdown.max.retries attempts, then an unclean
   stop; the model retries without bound, see docs/spec.md).
   Does: sends ControlledShutdownRequest to it. *)
RequestControlledShutdown(b) ==
    /\ alive[b]
    /\ ~cs_requested[b] \/ ~ShutdownInFlight(b)
    /\ controller # NoLeader
    /\ crashes < MaxCrashes
    /\ cs_requested' = [cs_requested EXCEPT ![b] = TRUE]
    /\ ctl_msgs' = ctl_msgs \cup
         {CtlMsg("ControlledShutdownRequest", b, controller, 0, CHOOSE q \in Partitions : TRUE, NoNode, <<>>, FALSE)}
    /\ UNCHANGED <<store_vars, ctl_vars, broker_vars, replica_vars, msgs, bound_vars, h_flags, admin_vars, opsctx_vars>>
    /\ HistoryNext

(* ControlledShutdownResponse(b) -- actor broker:b.
   When: the controller's answer to b's request is in flight.
   Does: if b leads nothing any more it checkpoints its HWs and stops (as a crash, counted by the
   crash bound); otherwise it stays leaving and asks again (RequestControlledShutdown). *)
ControlledShutdownResponse(b) ==
    \E m \in ctl_msgs :
    /\ m.type = "ControlledShutdownResponse"
    /\ m.dst = b
    /\ alive[b]
    /\ IF m.parts = {} /\ crashes < MaxCrashes
       THEN /\ crashes' = crashes + 1
            /\ alive' = [alive EXCEPT ![b] = FALSE]
            /\ registered' = [registered EXCEPT ![b] = 0]
            /\ controller' = IF controller = b THEN NoLeader ELSE controller
            /\ ResignVars(b)
            /\ reregister' = [reregister EXCEPT ![b] = FALSE]
            /\ broker_controller_epoch' = [broker_controller_epoch EXCEPT ![b] = 0]
            /\ hw_checkpoint' = [hw_checkpoint EXCEPT ![b] = [p \in Partitions |-> IF role[b][p] = "absent" THEN @[p] ELSE hw[b][p]]]
            /\ role' = [role EXCEPT ![b] = [p \in Partitions |-> IF role[b][p] = "absent" THEN "absent" ELSE "none"]]
            /\ local_leader_epoch' = [local_leader_epoch EXCEPT ![b] = [p \in Partitions |-> -1]]
            /\ local_leader' = [local_leader EXCEPT ![b] = [p \in Partitions |-> NoLeader]]
            /\ local_isr' = [local_isr EXCEPT ![b] = [p \in Partitions |-> {}]]
            /\ local_version' = [local_version EXCEPT ![b] = [p \in Partitions |-> -1]]
            /\ hw' = [hw EXCEPT ![b] = [p \in Partitions |-> Min(hw[b][p], Len(log[b][p]))]]
            /\ epoch_start_offset' = [epoch_start_offset EXCEPT ![b] = [p \in Partitions |-> 0]]
            /\ follower_leo' = [follower_leo EXCEPT ![b] = [p \in Partitions |-> [f \in Brokers |-> -2]]]
            /\ truncating' = [truncating EXCEPT ![b] = [p \in Partitions |-> FALSE]]
            /\ inflight' = [inflight EXCEPT ![b] = [p \in Partitions |-> FALSE]]
            /\ ctl_msgs' = {x \in ctl_msgs : SurvivesCrash(b, x)}
            /\ msgs' = {x \in msgs : x.dst # b /\ x.src # b}
            /\ ctl_shutting' = [ctl_shutting EXCEPT ![b] = {}]
            /\ ctl_reassign' = [ctl_reassign EXCEPT ![b] = [p \in Partitions |-> <<>>]]
            /\ ctl_deleting' = [ctl_deleting EXCEPT ![b] = {}]
            /\ ctl_ineligible' = [ctl_ineligible EXCEPT ![b] = {}]
            /\ cs_requested' = [cs_requested EXCEPT ![b] = FALSE]
            /\ UNCHANGED <<controller_epoch, assignment, leader, leader_epoch, isr, partition_controller_epoch,
                           partition_version, session, broker_epoch, log, next_record, expiries, h_flags, admin_vars>>
       ELSE /\ ctl_msgs' = ctl_msgs \ {m}
            /\ UNCHANGED <<store_vars, ctl_vars, broker_vars, replica_vars, msgs, bound_vars, h_flags, admin_vars, opsctx_vars,
                           cs_requested>>
    /\ HistoryNext

(* Admin requests -- actor admin.  Each creates its admin node (which must not exist yet). *)
ReassignPartitions(p, target) ==
    /\ assignment[p] # <<>>
    /\ \A q \in Partitions : reassign_req[q] = <<>>
    /\ reassign_req' = [reassign_req EXCEPT ![p] = target]
    /\ UNCHANGED <<proto_vars, h_flags, preferred_req, delete_req, opsctx_vars, cs_requested>>
    /\ HistoryNext

PreferredElection(S) ==
    /\ S # {}
    /\ \A p \in S : assignment[p] # <<>>
    /\ preferred_req = {}
    /\ preferred_req' = S
    /\ UNCHANGED <<proto_vars, h_flags, reassign_req, delete_req, opsctx_vars, cs_requested>>
    /\ HistoryNext

DeleteTopic(p) ==
    /\ assignment[p] # <<>>
    /\ p \notin delete_req
    /\ delete_req' = delete_req \cup {p}
    /\ UNCHANGED <<proto_vars, h_flags, reassign_req, preferred_req, opsctx_vars, cs_requested>>
    /\ HistoryNext

\* CreateTopic again after a deletion completed (the core's CreateTopic with the admin nodes).
OpsCreateTopic(p) ==
    /\ p \notin delete_req
    /\ CreateTopic(p)
    /\ UNCHANGED ops_vars

(***************************************************************************************)
(* Next: the core's broker, environment and network steps (a controller that resigns or *)
(* crashes in them loses its operation context), the operation-aware controller events, *)
(* the operations, and the admin requests.                                              *)
(***************************************************************************************)
CoreStep(A) == A /\ OpsCtxFollows /\ UNCHANGED <<admin_vars, cs_requested>>

\* Restarting clears the broker's controlled-shutdown request.
OpsBrokerRestart(b) ==
    /\ BrokerRestart(b)
    /\ cs_requested' = [cs_requested EXCEPT ![b] = FALSE]
    /\ UNCHANGED <<admin_vars, opsctx_vars>>

OpsControlNext ==
    \/ \E b \in Brokers : OpsControllerElect(b)
    \/ \E b \in Brokers : OpsBrokerReregister(b)
    \/ \E c \in Brokers : OpsBrokerChange(c)
    \/ \E c \in Brokers : OpsTopicChange(c)
    \/ \E c \in Brokers : CoreStep(ControllerResign(c))
    \/ \E c \in Brokers : CoreStep(IsrChangeNotification(c))
    \/ \E c \in Brokers : ControlledShutdownRequest(c)
    \/ \E c \in Brokers : PreferredReplicaElection(c)
    \/ \E c \in Brokers : AutoPreferredReplicaElection(c)
    \/ \E c \in Brokers : PartitionReassignment(c)
    \/ \E c \in Brokers : ReassignmentIsrChange(c)
    \/ \E c \in Brokers : TopicDeletion(c)
    \/ \E c \in Brokers : StopReplicaResponse(c)
    \/ \E b \in Brokers : StopReplica(b)
    \/ \E b \in Brokers : RequestControlledShutdown(b)
    \/ \E b \in Brokers : ControlledShutdownResponse(b)
    \/ \E b \in Brokers : CoreStep(LeaderAndIsr(b))
    \/ \E b \in Brokers : CoreStep(UpdateMetadata(b))
    \/ \E b \in Brokers : CoreStep(BrokerCrash(b))
    \/ \E b \in Brokers : OpsBrokerRestart(b)
    \/ \E b \in Brokers : CoreStep(SessionExpire(b))
    \/ \E p \in Partitions, t \in ReassignTargets : ReassignPartitions(p, t)
    \/ \E p \in Partitions : PreferredElection({p})
    \/ \E p \in Partitions : DeleteTopic(p)
    \/ \E p \in Partitions : OpsCreateTopic(p)

OpsReplicationNext ==
    \/ \E b \in Brokers, p \in Partitions : CoreStep(FetchRound(b, p))
    \/ \E b \in Brokers, p \in Partitions : CoreStep(TruncationRound(b, p))
    \/ \E b \in Brokers, p \in Partitions : CoreStep(Produce(b, p))

\* Only the nonempty sets of other brokers can be laggards (IsrShrink): the others are not enumerated.
OpsShrinkNext == \E b \in Brokers, p \in Partitions : \E s \in SUBSET (Brokers \ {b}) \ {{}} : CoreStep(IsrShrink(b, p, s))

OpsNext == OpsControlNext \/ OpsReplicationNext \/ OpsShrinkNext \/ CoreStep(DropMessage("controller"))

OpsSpec == OpsInitEmpty /\ [][OpsNext]_all_vars
=============================================================================
