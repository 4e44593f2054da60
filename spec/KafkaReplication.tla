-------------------------------- MODULE KafkaReplication --------------------------------
(***************************************************************************************)
(* kcm core specification: the ZooKeeper-era Kafka controller and replication protocol. *)
(*                                                                                     *)
(* The reference for the behaviour is Kafka's ZooKeeper-era controller and replica     *)
(* manager (apache/kafka; the state tables follow release 2.3, spec/states.py).  This   *)
(* is what every oracle of kcm judges by; the Python implementation in impl/ is checked *)
(* against it, never the other way round.  Variable names are those of                 *)
(* spec/vocabulary.py and trace format v1 (docs/trace-format.md); action names are      *)
(* those of vocabulary.ACTIONS.                                                         *)
(*                                                                                     *)
(* What differs between the design eras (follower truncation, fencing of fetches by     *)
(* the current leader epoch, the ISR expansion rule, the KAFKA-2334 HW exposure rule)   *)
(* is NOT defined here: it enters through the constant operators of the "era hooks"     *)
(* below, which the modules TruncationHW, TruncationKIP101, TruncationKIP279 and        *)
(* TruncationKIP320 define and a model's .cfg binds with `<-`.                          *)
(*                                                                                     *)
(* Encoding of "absent" (a key missing from a trace map) by sentinel values:            *)
(*   leader = -1 (NoLeader); leader_epoch, local_leader_epoch = -1; partition_version = *)
(*   -1; partition_controller_epoch = 0; assignment = <<>>; isr, local_isr = {};        *)
(*   role = "absent" (no replica object: log key absent too) or "none" (replica exists, *)
(*   no role, as after a crash: role key absent, log key present);                      *)
(*   epoch_start_offset = 0 unless role = "leader"; acting_controller_epoch = 0;         *)
(*   partition_state = "NonExistentPartition"; replica_state = "NonExistentReplica".     *)
(* ISRs are sets (the trace's lists, compared as sets).                                 *)
(***************************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, TLC

CONSTANTS
    Brokers,                 \* broker ids, e.g. {1, 2, 3}
    Partitions,              \* partition names, e.g. {"p0"}
    Assignment,              \* [Partitions -> Seq(Brokers)]: the replica assignment, in preference order
    UncleanElection,         \* knob unclean_election
    ControllerEpochFencing,  \* knob controller_epoch_fencing
    LeaderEpochCheck,        \* knob leader_epoch_check
    MinIsr,                  \* knob min_isr (producers use acks = -1)
    BrokerEpoch,             \* knob broker_epoch (KIP-380, Kafka 2.2; FALSE: before 2.2)
    MaxRecords,              \* bound: records produced in a behaviour
    MaxLeaderEpoch,          \* bound: leader epochs written to the store
    MaxControllerEpoch,      \* bound: controller elections
    MaxCrashes,              \* bound: broker crashes
    MaxExpiries,             \* bound: session expiries
    ModelUpdateMetadata      \* BOOLEAN: controller events also send UpdateMetadata requests (they only
                             \*   carry the controller epoch here); FALSE leaves them out of a model

(* The era: its name (the knob truncation) and the hooks that the configuration kcm     *)
(* writes (spec/tlc/config.py) binds to the definitions of the era's Truncation*.tla.    *)
CONSTANTS
    Truncation,                 \* the era's name: "hw", "kip101", "kip279" or "kip320"
    TruncateOnBecomeFollower,   \* BOOLEAN: a new follower truncates to its own HW at once (no epoch request)
    FenceCurrentLeaderEpoch,    \* BOOLEAN: Fetch/OffsetsForLeaderEpoch carry and check the current leader epoch
    EpochEndAnswer(_, _, _),    \* (leader log, requested epoch, leader's epoch) -> <<epoch, end offset>>
    TruncationOffset(_, _, _),  \* (follower log, answered epoch, answered end offset) -> truncation offset
    InSyncForExpansion(_, _, _),\* (fetch offset, leader HW, leader's epoch start offset) -> joins the ISR?
    ExposesHw(_, _)             \* (leader HW, epoch start offset) -> is the leader's HW exposed? (invariant)

(* The core's own hooks: each bound to this module's definition of its name with the prefix Default, unless *)
(* a design binds it to one of its own (kcm.spec.design_folder; spec/tlc/config.py writes the bindings).     *)
CONSTANTS
    OfflineLeader(_, _, _),     \* (assignment, ISR, electable brokers) -> the leader after a failure, or NoLeader
    RefusesLeaderEpoch(_, _),   \* (a LeaderAndIsr entry's leader epoch, the broker's, -1 for none) -> refused?
    AcceptsWrite(_),            \* (the size of the ISR the leader knows) -> does it take a produce (acks = -1)?
    RefusesControllerEpoch(_, _), \* (a request's controller epoch, the newest the broker has seen) -> refused?
    FencesControllerWrites,     \* BOOLEAN: a controller's store writes check the controller epoch node
    BrokerEpochFencing          \* BOOLEAN: KIP-380, requests carry the broker epoch and bounces are seen

(***************************************************************************************)
(* Variables.                                                                           *)
(***************************************************************************************)
VARIABLES
    \* the coordination store (ZooKeeper)
    controller,                  \* holder of /controller, NoLeader if none
    controller_epoch,            \* /controller_epoch
    assignment,                  \* [Partitions -> Seq(Brokers)], <<>> while the topic does not exist
    leader, leader_epoch, isr, partition_controller_epoch, partition_version,  \* partition state node
    registered,                  \* [Brokers -> Nat]: session of the /brokers/ids/N node, 0 if none  (not in the trace format)
    \* each broker's controller role and its context
    acting_controller_epoch,     \* [Brokers -> Nat]: epoch the broker acts as controller in, 0 if none
    partition_state,             \* [Brokers -> [Partitions -> PartitionStates]]
    replica_state,               \* [Brokers -> [Partitions -> [Brokers -> ReplicaStates]]]
    ctl_live,                    \* [Brokers -> [Brokers -> Nat]]: context's live brokers (registration session, 0 = not live)
    ctl_cache,                   \* [Brokers -> [Partitions -> Node]]: context's cached partition state nodes
    zombie_events,               \* [Brokers -> SUBSET EventKinds]: events a controller had queued when its session
                                 \*   expired; they come before its Reregister event, so it may still handle them
                                 \*   as a deposed (zombie) controller, and nothing else (not in the trace format)
    \* each broker's replica manager
    alive,                       \* [Brokers -> BOOLEAN]
    session,                     \* [Brokers -> Nat]: current store session number (not in the trace format)
    reregister,                  \* [Brokers -> BOOLEAN]: a Reregister event is queued after a session expiry (not in the trace format)
    broker_controller_epoch,     \* [Brokers -> Nat]: newest controller epoch seen
    broker_epoch,                \* [Brokers -> Nat]: the session of the broker's latest registration, its
                                 \*   KIP-380 broker epoch (Kafka: the czxid of /brokers/ids/N) (not in trace v1)
    role,                        \* [Brokers -> [Partitions -> {"leader","follower","none","absent"}]]
    local_leader_epoch,          \* [Brokers -> [Partitions -> Int]]
    local_leader,                \* [Brokers -> [Partitions -> {NoLeader} \cup Brokers]]: leader id the replica knows (not in the trace format)
    local_isr,                   \* [Brokers -> [Partitions -> SUBSET Brokers]]
    local_version,               \* [Brokers -> [Partitions -> Int]]: partition version a leader knows, for its CAS; -1 unless leader (not in the trace format)
    log,                         \* [Brokers -> [Partitions -> Seq(<<leader_epoch, record>>)]]
    hw, hw_checkpoint, epoch_start_offset,
    follower_leo,                \* [Brokers -> [Partitions -> [Brokers -> Int]]]: leader's view of follower fetch offsets;
                                 \*   -2 = not a follower of this leader, -1 = unknown (not in the trace format)
    truncating,                  \* [Brokers -> [Partitions -> BOOLEAN]]: follower must ask OffsetsForLeaderEpoch first (not in the trace format)
    inflight,                    \* [Brokers -> [Partitions -> BOOLEAN]]: follower has a request outstanding (not in the trace format)
    \* the network
    ctl_msgs,                    \* set of in-flight LeaderAndIsr requests (lossy, reordering)
    msgs,                        \* set of in-flight broker-to-broker requests and responses (lossy, reordering)
    \* bounds
    next_record,                 \* records produced so far (record ids are 1..next_record)
    crashes, expiries,
    \* history, for the invariants (never read by the protocol)
    h_leaders,                   \* [Partitions -> SUBSET (Int \X Brokers)]: every (leader epoch, broker) ever named leader
    h_committed,                 \* [Partitions -> Seq]: the committed prefix C(p)
    h_exposed_hw,                \* [Partitions -> Nat]: highest HW exposed by a current leader in an EARLIER state
    h_violations,                \* set of names of step properties some step violated (HistoryNext)
    h_flags                      \* [stale, partition, replica, refused |-> BOOLEAN], set by the actions:
                                 \*   stale: a step broke StaleControllerFenced; partition/replica: a controller
                                 \*   recorded an invalid state-machine transition; refused: a controller
                                 \*   attempted an invalid transition and refused it (informational)

store_vars   == <<controller, controller_epoch, assignment, leader, leader_epoch, isr,
                  partition_controller_epoch, partition_version, registered>>
ctl_vars     == <<acting_controller_epoch, partition_state, replica_state, ctl_live, ctl_cache, zombie_events>>
broker_vars  == <<alive, session, reregister, broker_controller_epoch, broker_epoch>>
replica_vars == <<role, local_leader_epoch, local_leader, local_isr, local_version, log, hw,
                  hw_checkpoint, epoch_start_offset, follower_leo, truncating, inflight>>
net_vars     == <<ctl_msgs, msgs>>
bound_vars   == <<next_record, crashes, expiries>>
hist_vars    == <<h_leaders, h_committed, h_exposed_hw, h_violations, h_flags>>
proto_vars   == <<store_vars, ctl_vars, broker_vars, replica_vars, net_vars, bound_vars>>
vars         == <<proto_vars, hist_vars>>

\* A view for TLC (VIEW in a .cfg): states that differ only in history the model's invariants do
\* not read are the same state for the rest of the behaviour (history never influences the
\* protocol).  DataView keeps what ReplicaLogsAgree and NoCommittedDataLoss read.
DataView == <<proto_vars, h_committed, h_violations>>

(***************************************************************************************)
(* Constants and helpers.                                                               *)
(***************************************************************************************)
NoLeader == -1          \* LeaderAndIsr.NoLeader: brokers are non-negative, 0 among them
Undefined == -1          \* UNDEFINED_EPOCH
MaxFetchRecords == 4     \* replica_manager.MAX_FETCH_RECORDS

PartitionStates == {"NonExistentPartition", "NewPartition", "OnlinePartition", "OfflinePartition"}
ReplicaStates == {"NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionStarted",
                  "ReplicaDeletionSuccessful", "ReplicaDeletionIneligible", "NonExistentReplica"}

\* The valid-previous-state tables of Kafka 2.3+ (spec/states.py).
ValidPreviousPartition ==
    [NewPartition         |-> {"NonExistentPartition"},
     OnlinePartition      |-> {"NewPartition", "OnlinePartition", "OfflinePartition"},
     OfflinePartition     |-> {"NewPartition", "OnlinePartition", "OfflinePartition"},
     NonExistentPartition |-> {"OfflinePartition"}]
ValidPreviousReplica ==
    [NewReplica                |-> {"NonExistentReplica"},
     OnlineReplica             |-> {"NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible"},
     OfflineReplica            |-> {"NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible"},
     ReplicaDeletionStarted    |-> {"OfflineReplica"},
     ReplicaDeletionSuccessful |-> {"ReplicaDeletionStarted"},
     ReplicaDeletionIneligible |-> {"OfflineReplica", "ReplicaDeletionStarted"},
     NonExistentReplica        |-> {"ReplicaDeletionSuccessful"}]
\* Controller events a deposed controller may still have queued.
EventKinds == {"BrokerChange", "TopicChange", "IsrChangeNotification"}

ValidPartitionTransition(from, to) == from \in ValidPreviousPartition[to]
ValidReplicaTransition(from, to) == from \in ValidPreviousReplica[to]

Min(a, b) == IF a < b THEN a ELSE b
Max(a, b) == IF a > b THEN a ELSE b
MinOf(S) == CHOOSE x \in S : \A y \in S : x <= y
Range(s) == {s[i] : i \in DOMAIN s}

\* The first element of seq that is in S, in sequence order; NoLeader if none (election.py's _first).
FirstIn(seq, S) ==
    IF \E i \in DOMAIN seq : seq[i] \in S
    THEN seq[CHOOSE i \in DOMAIN seq : seq[i] \in S /\ \A j \in 1..(i - 1) : seq[j] \notin S]
    ELSE NoLeader

\* A partition state node (or the controller's cached copy of one).
NoNode == [leader |-> NoLeader, le |-> -1, isr |-> {}, pce |-> 0, version |-> -1]
HasNode(n) == n.le # -1
StoreNode(p) == [leader |-> leader[p], le |-> leader_epoch[p], isr |-> isr[p],
                 pce |-> partition_controller_epoch[p], version |-> partition_version[p]]

(***************************************************************************************)
(* Replica logs (impl/replica_log.py).  A log is a sequence of <<leader epoch, record>>; *)
(* the entry at TLA+ index i has offset i - 1.                                          *)
(***************************************************************************************)
LatestEpoch(lg) == IF lg = <<>> THEN Undefined ELSE lg[Len(lg)][1]

\* Offset just past the last record of `epoch` or earlier: the start of the first later epoch.
EndOffsetForEpoch(lg, epoch, current) ==
    IF epoch >= current THEN Len(lg)
    ELSE IF \E i \in 1..Len(lg) : lg[i][1] > epoch
         THEN (CHOOSE i \in 1..Len(lg) : lg[i][1] > epoch /\ \A j \in 1..(i - 1) : lg[j][1] <= epoch) - 1
         ELSE Len(lg)

\* KIP-279: the largest epoch of the log not newer than the requested one.
LargestEpochAtMost(lg, epoch, current) ==
    IF current <= epoch THEN current
    ELSE LET k == IF \E i \in 1..Len(lg) : lg[i][1] > epoch
                  THEN CHOOSE i \in 1..Len(lg) : lg[i][1] > epoch /\ \A j \in 1..(i - 1) : lg[j][1] <= epoch
                  ELSE Len(lg) + 1
         IN IF k = 1 THEN Undefined ELSE lg[k - 1][1]

Prefix(lg, n) == SubSeq(lg, 1, Min(n, Len(lg)))
IsPrefix(a, b) == Len(a) <= Len(b) /\ SubSeq(b, 1, Len(a)) = a

(***************************************************************************************)
(* Message formats.  Every record carries all fields so that sets of messages are       *)
(* homogeneous.                                                                         *)
(***************************************************************************************)
\* Broker-to-broker messages: type, endpoints, partition, and the union of the fields of
\* Fetch, FetchResponse, OffsetsForLeaderEpoch and OffsetsForLeaderEpochResponse.
BMsg(type, src, dst, p, offset, cle, epoch, err, records, hwm, leo) ==
    [type |-> type, src |-> src, dst |-> dst, p |-> p, offset |-> offset, cle |-> cle, epoch |-> epoch,
     err |-> err, records |-> records, hwm |-> hwm, leo |-> leo]

(***************************************************************************************)
(* History bookkeeping (not part of the protocol).                                      *)
(***************************************************************************************)
\* Brokers that lead p in epoch e, and the store's leader: the claims OneLeaderPerEpoch collects.
LeaderClaims(p) ==
    {<<leader_epoch[p], leader[p]>> : i \in (IF leader[p] # NoLeader /\ leader_epoch[p] >= 0 THEN {1} ELSE {})}
    \cup {<<local_leader_epoch[b][p], b>> : b \in {x \in Brokers : role[x][p] = "leader" /\ local_leader_epoch[x][p] >= 0}}

\* The current leader of p: the store's leader, if it leads p in the store's epoch; 0 otherwise.
CurrentLeader(p) ==
    IF leader[p] # NoLeader /\ role[leader[p]][p] = "leader" /\ local_leader_epoch[leader[p]][p] = leader_epoch[p]
    THEN leader[p] ELSE NoLeader

\* The HW the current leader of p exposes, -1 if none (KAFKA-2334 fix: withheld until it reaches its epoch start).
ExposedHw(p) ==
    LET b == CurrentLeader(p)
    IN IF b # NoLeader /\ ExposesHw(hw[b][p], epoch_start_offset[b][p]) THEN hw[b][p] ELSE -1


\* History update: evaluated on every step (unprimed = before, primed = after).
\*
\* Performance: TLC caches the value of a LET definition or of an operator argument only if it reads
\* no primed variable; one that does is evaluated again at every reference.  So HistoryNext binds the
\* values it reads more than once with \E x \in {e} (TLC evaluates e once and binds x to its value):
\* per partition, the leaders' committed candidates (tips) and the epochs that can still be claimed
\* (live).  TLCEval turns each function into a table, so that applying it does not evaluate it again.
\* The bound sets are evaluated once the protocol's primed variables have their values: HistoryNext
\* is the last conjunct of every action.

\* Epochs that can still be claimed: a new leader epoch is always above the store's, and an old one
\* can only come back as a copy of a store node (in flight, cached by a controller, or held by a
\* broker).  Older entries can never be contradicted again and are dropped, which keeps behaviours
\* that differ only in forgotten epochs from multiplying the state space.
ClaimableEpochs(p) ==
    ({leader_epoch[p]} \cup {m.le : m \in {x \in ctl_msgs : x.p = p}}
     \cup {local_leader_epoch[b][p] : b \in Brokers} \cup {ctl_cache[c][p].le : c \in Brokers})
    \ {-1}
EpochFloor(live) == IF live = {} THEN 0 ELSE MinOf(live)
\* Each leader's log below its HW: the candidates for the committed prefix C(p).
LeaderPrefixes(p) == {Prefix(log[b][p], hw[b][p]) : b \in {x \in Brokers : role[x][p] = "leader"}}

HistoryNext ==
    \E tips \in {TLCEval([p \in Partitions |-> LeaderPrefixes(p)'])},
       live \in {TLCEval([p \in Partitions |-> ClaimableEpochs(p)'])} :
    LET \* The step properties a step breaks.  Each is first tested on whole functions (a value TLC
        \* compares natively): a variable that did not change cannot have decreased.
        hwDown ==
          /\ hw' # hw
          /\ \E b \in Brokers, p \in Partitions :
                /\ role[b][p] = "leader" /\ role'[b][p] = "leader"
                /\ local_leader_epoch[b][p] = local_leader_epoch'[b][p]
                /\ hw'[b][p] < hw[b][p]
        ceDown ==
          \/ controller_epoch' < controller_epoch
          \/ controller' # NoLeader /\ controller' # controller /\ controller_epoch' <= controller_epoch
          \/ /\ broker_controller_epoch' # broker_controller_epoch
             /\ \E b \in Brokers : alive[b] /\ alive'[b] /\ broker_controller_epoch'[b] < broker_controller_epoch[b]
        leDown ==
          \/ /\ leader_epoch' # leader_epoch
             /\ \E p \in Partitions : leader_epoch[p] >= 0 /\ leader_epoch'[p] >= 0 /\ leader_epoch'[p] < leader_epoch[p]
          \/ /\ local_leader_epoch' # local_leader_epoch
             /\ \E b \in Brokers, p \in Partitions :
                   local_leader_epoch[b][p] >= 0 /\ local_leader_epoch'[b][p] >= 0
                   /\ local_leader_epoch'[b][p] < local_leader_epoch[b][p]
        \* committed prefix: each leader's prefix below its HW must extend C(p) (or be extended by it)
        NewCommitted(p) ==
          LET longer == {c \in tips[p] : Len(c) > Len(h_committed[p])}
          IN IF longer = {} THEN h_committed[p]
             ELSE CHOOSE c \in longer : \A d \in longer : Len(d) <= Len(c)
        conflict ==
          \E p \in Partitions : \E c \in tips[p] : Len(c) > Len(h_committed[p]) /\ ~IsPrefix(h_committed[p], c)
        \* a deleted partition's history ends (a topic created again starts at epoch 0)
        gone(p) == assignment[p] # <<>> /\ assignment'[p] = <<>>
    IN /\ h_leaders' = [p \in Partitions |-> IF gone(p) THEN {} ELSE
                          LET floor == EpochFloor(live[p])
                          IN {x \in h_leaders[p] \cup LeaderClaims(p)' : x[1] >= floor}]
       /\ h_committed' = [p \in Partitions |-> IF gone(p) THEN <<>> ELSE NewCommitted(p)]
       /\ h_exposed_hw' = [p \in Partitions |-> IF gone(p) THEN 0 ELSE Max(h_exposed_hw[p], ExposedHw(p))]
       \* (most steps break nothing: then the set is not rebuilt)
       /\ h_violations' = IF hwDown \/ ceDown \/ leDown \/ conflict
                          THEN h_violations
                               \cup (IF hwDown THEN {"HighWatermarkMonotonicPerLeaderEpoch"} ELSE {})
                               \cup (IF ceDown THEN {"ControllerEpochMonotonic"} ELSE {})
                               \cup (IF leDown THEN {"LeaderEpochMonotonic"} ELSE {})
                               \cup (IF conflict THEN {"NoCommittedDataLoss"} ELSE {})
                          ELSE h_violations

(***************************************************************************************)
(* Initial states.                                                                      *)
(***************************************************************************************)
NoReplicaInit ==
    /\ role = [b \in Brokers |-> [p \in Partitions |-> "absent"]]
    /\ local_leader_epoch = [b \in Brokers |-> [p \in Partitions |-> -1]]
    /\ local_leader = [b \in Brokers |-> [p \in Partitions |-> NoLeader]]
    /\ local_isr = [b \in Brokers |-> [p \in Partitions |-> {}]]
    /\ local_version = [b \in Brokers |-> [p \in Partitions |-> -1]]
    /\ log = [b \in Brokers |-> [p \in Partitions |-> <<>>]]
    /\ hw = [b \in Brokers |-> [p \in Partitions |-> 0]]
    /\ hw_checkpoint = [b \in Brokers |-> [p \in Partitions |-> 0]]
    /\ epoch_start_offset = [b \in Brokers |-> [p \in Partitions |-> 0]]
    /\ follower_leo = [b \in Brokers |-> [p \in Partitions |-> [f \in Brokers |-> -2]]]
    /\ truncating = [b \in Brokers |-> [p \in Partitions |-> FALSE]]
    /\ inflight = [b \in Brokers |-> [p \in Partitions |-> FALSE]]

NoContext == [b \in Brokers |-> 0]
EmptyPartitionStates == [p \in Partitions |-> "NonExistentPartition"]
EmptyReplicaStates == [p \in Partitions |-> [r \in Brokers |-> "NonExistentReplica"]]
EmptyCache == [p \in Partitions |-> NoNode]

HistoryInit ==
    /\ h_leaders = [p \in Partitions |-> LeaderClaims(p)]
    /\ h_committed = [p \in Partitions |-> <<>>]
    /\ h_exposed_hw = [p \in Partitions |-> 0]
    /\ h_violations = {}
    /\ h_flags = [stale |-> FALSE, partition |-> FALSE, replica |-> FALSE, refused |-> FALSE]

\* The implementation's Init: every broker up and registered, no controller, no topic.
InitEmpty ==
    /\ controller = NoLeader
    /\ controller_epoch = 0
    /\ assignment = [p \in Partitions |-> <<>>]
    /\ leader = [p \in Partitions |-> NoLeader]
    /\ leader_epoch = [p \in Partitions |-> -1]
    /\ isr = [p \in Partitions |-> {}]
    /\ partition_controller_epoch = [p \in Partitions |-> 0]
    /\ partition_version = [p \in Partitions |-> -1]
    /\ registered = [b \in Brokers |-> 1]
    /\ acting_controller_epoch = [b \in Brokers |-> 0]
    /\ partition_state = [b \in Brokers |-> EmptyPartitionStates]
    /\ replica_state = [b \in Brokers |-> EmptyReplicaStates]
    /\ ctl_live = [b \in Brokers |-> NoContext]
    /\ ctl_cache = [b \in Brokers |-> EmptyCache]
    /\ zombie_events = [b \in Brokers |-> {}]
    /\ alive = [b \in Brokers |-> TRUE]
    /\ session = [b \in Brokers |-> 1]
    /\ reregister = [b \in Brokers |-> FALSE]
    /\ broker_controller_epoch = [b \in Brokers |-> 0]
    /\ broker_epoch = [b \in Brokers |-> 1]
    /\ NoReplicaInit
    /\ ctl_msgs = {}
    /\ msgs = {}
    /\ next_record = 0
    /\ crashes = 0
    /\ expiries = 0
    /\ HistoryInit

\* A settled cluster, as the implementation's `stabilize` leaves it after the first controller
\* election (the lowest broker id) and the creation of every partition, with every LeaderAndIsr
\* applied: leader = first assigned replica, epoch 0, every assigned replica in the ISR, empty logs.
CtlId == MinOf(Brokers)
StableNode(p) == [leader |-> Assignment[p][1], le |-> 0, isr |-> Range(Assignment[p]), pce |-> 1, version |-> 0]
InitStable ==
    /\ controller = CtlId
    /\ controller_epoch = 1
    /\ assignment = Assignment
    /\ leader = [p \in Partitions |-> Assignment[p][1]]
    /\ leader_epoch = [p \in Partitions |-> 0]
    /\ isr = [p \in Partitions |-> Range(Assignment[p])]
    /\ partition_controller_epoch = [p \in Partitions |-> 1]
    /\ partition_version = [p \in Partitions |-> 0]
    /\ registered = [b \in Brokers |-> 1]
    /\ acting_controller_epoch = [b \in Brokers |-> IF b = CtlId THEN 1 ELSE 0]
    /\ partition_state = [b \in Brokers |-> IF b = CtlId THEN [p \in Partitions |-> "OnlinePartition"]
                                               ELSE EmptyPartitionStates]
    /\ replica_state = [b \in Brokers |->
                          IF b = CtlId
                          THEN [p \in Partitions |-> [r \in Brokers |->
                                  IF r \in Range(Assignment[p]) THEN "OnlineReplica" ELSE "NonExistentReplica"]]
                          ELSE EmptyReplicaStates]
    /\ ctl_live = [b \in Brokers |-> IF b = CtlId THEN [x \in Brokers |-> 1] ELSE NoContext]
    /\ ctl_cache = [b \in Brokers |-> IF b = CtlId THEN [p \in Partitions |-> StableNode(p)] ELSE EmptyCache]
    /\ zombie_events = [b \in Brokers |-> {}]
    /\ alive = [b \in Brokers |-> TRUE]
    /\ session = [b \in Brokers |-> 1]
    /\ reregister = [b \in Brokers |-> FALSE]
    /\ broker_controller_epoch = [b \in Brokers |-> 1]
    /\ broker_epoch = [b \in Brokers |-> 1]
    /\ role = [b \in Brokers |-> [p \in Partitions |->
                 IF b = Assignment[p][1] THEN "leader"
                 ELSE IF b \in Range(Assignment[p]) THEN "follower" ELSE "absent"]]
    /\ local_leader_epoch = [b \in Brokers |-> [p \in Partitions |-> IF b \in Range(Assignment[p]) THEN 0 ELSE -1]]
    /\ local_leader = [b \in Brokers |-> [p \in Partitions |->
                         IF b \in Range(Assignment[p]) THEN Assignment[p][1] ELSE NoLeader]]
    /\ local_isr = [b \in Brokers |-> [p \in Partitions |-> IF b \in Range(Assignment[p]) THEN Range(Assignment[p]) ELSE {}]]
    /\ local_version = [b \in Brokers |-> [p \in Partitions |-> IF b \in Range(Assignment[p]) THEN 0 ELSE -1]]
    /\ log = [b \in Brokers |-> [p \in Partitions |-> <<>>]]
    /\ hw = [b \in Brokers |-> [p \in Partitions |-> 0]]
    /\ hw_checkpoint = [b \in Brokers |-> [p \in Partitions |-> 0]]
    /\ epoch_start_offset = [b \in Brokers |-> [p \in Partitions |-> 0]]
    /\ follower_leo = [b \in Brokers |-> [p \in Partitions |-> [f \in Brokers |->
                         IF b = Assignment[p][1] /\ f \in Range(Assignment[p]) /\ f # b THEN -1 ELSE -2]]]
    \* a follower with an empty log has nothing to truncate: SendFetch would clear the flag at once
    /\ truncating = [b \in Brokers |-> [p \in Partitions |-> FALSE]]
    /\ inflight = [b \in Brokers |-> [p \in Partitions |-> FALSE]]
    /\ ctl_msgs = {}
    /\ msgs = {}
    /\ next_record = 0
    /\ crashes = 0
    /\ expiries = 0
    /\ HistoryInit

(***************************************************************************************)
(* The controller.  One controller event is one atomic step.  Its effect on each        *)
(* partition is computed on a working record W; CommitEvent then applies all partitions *)
(* at once or, if the controller has been deposed and ControllerEpochFencing holds,     *)
(* applies nothing and the controller resigns (its first store write fails the          *)
(* /controller_epoch version check: ControllerMovedError, controller_store.py).         *)
(*                                                                                      *)
(* W: node (the store's partition node), cache (the context's copy), ps, rs (partition  *)
(* and replica states), asg (the context's assignment), del (its topic is being         *)
(* deleted), inel (deletion ineligible), tgt (reassignment target, <<>> if none; used   *)
(* by KafkaControllerOps), lai (the LeaderAndIsr batch: per broker the                  *)
(* node and assignment at the time of the last add, as RequestBatch keeps them), stop   *)
(* (StopReplica batch: per broker the set of `delete` flags), wrote (a store write),    *)
(* asgw (the assignment was written), badp/badr/refused (state-machine bookkeeping).    *)
(*                                                                                      *)
(* K: the event's context: [live |-> [Brokers -> session], shutting |-> SUBSET Brokers, *)
(* ce |-> the controller's epoch].                                                      *)
(*                                                                                      *)
(* Compare-and-set on the partition node: the controller decides on its cached node; if *)
(* the cached version is stale the write fails, the node is re-read and the decision    *)
(* taken again on the fresh node (partition_state_machine._elect, replica_state_machine.*)
(* _remove_from_isr).  A decision that does nothing on the cached node is final.        *)
(***************************************************************************************)
NoLai == [n |-> NoNode, asg |-> <<>>]

Work(c, p) ==
    [node |-> StoreNode(p), cache |-> ctl_cache[c][p], ps |-> partition_state[c][p],
     rs |-> replica_state[c][p], asg |-> assignment[p], del |-> FALSE, inel |-> FALSE, tgt |-> <<>>,
     lai |-> [b \in Brokers |-> NoLai], sealed |-> {}, stop |-> [b \in Brokers |-> {}],
     wrote |-> FALSE, asgw |-> FALSE, badp |-> FALSE, badr |-> FALSE, refused |-> FALSE]

Ctx(live, shutting, ce) == [live |-> live, shutting |-> shutting, ce |-> ce]
LiveOf(K) == {b \in Brokers : K.live[b] # 0}
\* ControllerContext.live_not_shutting_down()
Electable(K) == LiveOf(K) \ K.shutting

\* A transition of the partition (replica r) state machine, recorded; `bad` if the table forbids it
\* (the guards below only ever perform valid ones, as Kafka 2.3's state machines do).
PMove(W, to) == [W EXCEPT !.ps = to, !.badp = @ \/ ~ValidPartitionTransition(W.ps, to)]
RMove(W, r, to) == [W EXCEPT !.rs[r] = to, !.badr = @ \/ ~ValidReplicaTransition(W.rs[r], to)]
\* An invalid transition requested: logged and refused, nothing changes.
Refuse(W) == [W EXCEPT !.refused = TRUE]

\* RequestBatch.add_leader_and_isr: the context's state now, for live recipients.
AddLai(W, recipients, K) ==
    IF HasNode(W.cache)
    THEN [W EXCEPT !.lai = TLCEval([b \in Brokers |->
              IF b \in recipients \cap LiveOf(K) THEN [n |-> W.cache, asg |-> W.asg] ELSE W.lai[b]])]
    ELSE W

\* RequestBatch.seal: with SealRequests, the LeaderAndIsr requests collected so far go out as they
\* are and a later state-machine call of the same event sends its own: a partition elected after
\* the replica state machine's pass (failover, broker startup) sends its replicas the old
\* leadership first, then the new one, as the implementation and Kafka do.  Model checking keeps
\* the last request per broker and partition only (SealRequests = FALSE): controllers here take
\* their pending events in any order, and with sealed requests that freedom admits a loss the
\* implementation's FIFO queue excludes (docs/spec.md).  Trace validation seals.
SealRequests == FALSE
Seal(W) ==
    IF ~SealRequests THEN W
    ELSE [W EXCEPT !.sealed = @ \cup {<<b, W.lai[b]>> : b \in {x \in Brokers : HasNode(W.lai[x].n)}},
                   !.lai = [b \in Brokers |-> NoLai]]

\* RequestBatch.add_stop_replica (sent when the batch is flushed, to live brokers only).
AddStop(W, r, delete, K) ==
    IF r \in LiveOf(K) THEN [W EXCEPT !.stop[r] = @ \cup {delete}] ELSE W

\* Write the successor of node n (LeaderIsr.successor: every decision bumps the leader epoch).
WriteNode(W, n, newLeader, newIsr, K) ==
    LET written == [leader |-> newLeader, le |-> n.le + 1, isr |-> newIsr, pce |-> K.ce, version |-> n.version + 1]
    IN [W EXCEPT !.node = written, !.cache = written, !.wrote = TRUE]

\* Design.offline_partition_leader (kcm.impl.design): the first electable ISR member in assignment order, or,
\* with UncleanElection, the first electable replica.
DefaultOfflineLeader(asg, inSync, electable) ==
    LET clean == FirstIn(asg, electable \cap inSync)
    IN IF clean = NoLeader /\ UncleanElection THEN FirstIn(asg, electable) ELSE clean

\* Design.refuses_leader_epoch: with LeaderEpochCheck, an entry whose leader epoch is not newer than the one the
\* broker has (none: -1) is refused.
DefaultRefusesLeaderEpoch(epoch, known) == LeaderEpochCheck /\ known # -1 /\ epoch <= known

\* Design.accepts_write: a produce with acks = -1 needs an ISR of at least MinIsr members.
DefaultAcceptsWrite(isrSize) == isrSize >= MinIsr

\* Design.refuses_controller_epoch: with ControllerEpochFencing, a request of a controller epoch older than the
\* newest the broker has seen is refused.
DefaultRefusesControllerEpoch(epoch, seen) == ControllerEpochFencing /\ epoch < seen

\* Design.fences_controller_writes: with ControllerEpochFencing, a controller's store writes are conditional on
\* the controller epoch node it was elected with (a deposed controller's write fails).
DefaultFencesControllerWrites == ControllerEpochFencing

\* Design.broker_epoch_fencing: with BrokerEpoch (KIP-380, Kafka 2.2), controller requests carry the broker epoch,
\* a broker refuses one addressed to an earlier registration, and the controller sees a bounced broker.
DefaultBrokerEpochFencing == BrokerEpoch

\* PartitionStateMachine._decide: [leader (NoLeader = none), isr, recipients] for a strategy, on node n.
Decide(W, n, strategy, target, K) ==
    LET electable == Electable(K)
        everyone == LiveOf(K)
    IN CASE strategy = "offline" ->
              LET ldr == OfflineLeader(W.asg, n.isr, electable)
              IN [leader |-> ldr,
                  isr |-> IF ldr \in n.isr \cap electable THEN n.isr \cap electable ELSE {ldr},
                  recipients |-> Range(W.asg) \cap electable]
         [] strategy = "reassign" ->
              [leader |-> FirstIn(target, electable \cap n.isr), isr |-> n.isr, recipients |-> Range(target)]
         [] strategy = "preferred" ->
              [leader |-> IF W.asg # <<>> /\ W.asg[1] \in electable \cap n.isr THEN W.asg[1] ELSE NoLeader,
               isr |-> n.isr, recipients |-> Range(W.asg)]
         [] strategy = "controlled_shutdown" ->
              [leader |-> FirstIn(W.asg, (everyone \cap n.isr) \ K.shutting),
               isr |-> n.isr \ K.shutting, recipients |-> Range(W.asg) \cap everyone]

\* PartitionStateMachine._elect (Kafka 2.3.0 doElectLeaderForPartitions): read the node from the store,
\* never the cache, and decide on it; the read refreshes the cache whatever the decision.
Elect(W, strategy, target, K) ==
    IF ~HasNode(W.node) THEN W
    ELSE LET d == Decide(W, W.node, strategy, target, K)
         IN IF d.leader = NoLeader THEN [W EXCEPT !.cache = W.node]
            ELSE AddLai(WriteNode(W, W.node, d.leader, d.isr, K), d.recipients, K)

\* PartitionStateMachine._initialize: the first live assigned replica leads, epoch 0.
InitializeNode(W, K) ==
    LET newIsr == Range(W.asg) \cap Electable(K)
        created == [leader |-> FirstIn(W.asg, Electable(K)), le |-> 0, isr |-> newIsr, pce |-> K.ce, version |-> 0]
    IN IF newIsr = {} THEN W
       ELSE IF HasNode(W.node) THEN [W EXCEPT !.cache = W.node]      \* NodeExists: read it, fail
       ELSE AddLai([W EXCEPT !.node = created, !.cache = created, !.wrote = TRUE], newIsr, K)

\* Partition state machine.
PsmOnline(W, strategy, target, K) ==
    IF ~ValidPartitionTransition(W.ps, "OnlinePartition") THEN Refuse(W)
    ELSE LET W1 == IF W.ps = "NewPartition" THEN InitializeNode(W, K) ELSE Elect(W, strategy, target, K)
         IN IF W1.node # W.node THEN PMove(W1, "OnlinePartition") ELSE W1

PsmTo(W, to) ==
    IF ValidPartitionTransition(W.ps, to) THEN PMove(W, to) ELSE Refuse(W)

\* trigger_online_state_change: elect every New or Offline partition not being deleted.
TriggerOnline(W, K) ==
    IF W.ps \in {"NewPartition", "OfflinePartition"} /\ ~W.del THEN PsmOnline(W, "offline", <<>>, K) ELSE W

\* _remove_from_isr: the replica leaves the ISR (unless it is the last member); if it led, the
\* partition has no leader until an election; the leader epoch moves on either way.
RemoveFromIsr(W, r, K) ==
    LET Apply(Wx, n) ==
            LET W1 == WriteNode(Wx, n, IF n.leader = r THEN NoLeader ELSE n.leader,
                                IF Cardinality(n.isr) = 1 THEN n.isr ELSE n.isr \ {r}, K)
            IN IF W1.del THEN W1 ELSE AddLai(W1, Range(W1.asg) \ {r}, K)
    IN IF ~HasNode(W.cache) \/ r \notin W.cache.isr THEN W
       ELSE IF W.cache.version = W.node.version THEN Apply(W, W.cache)
       ELSE IF ~HasNode(W.node) \/ r \notin W.node.isr THEN [W EXCEPT !.cache = W.node]
       ELSE Apply(W, W.node)

\* Replica state machine, one replica (ReplicaStateMachine._enter and set_state).
RsmTo(W, r, to, K) ==
    IF ~ValidReplicaTransition(W.rs[r], to) THEN Refuse(W)
    ELSE CASE to = "NewReplica" ->
                IF HasNode(W.cache) /\ W.cache.leader = r THEN W ELSE RMove(AddLai(W, {r}, K), r, to)
           [] to = "OnlineReplica" ->
                LET W1 == IF r \in Range(W.asg) THEN W ELSE [W EXCEPT !.asg = Append(W.asg, r)]
                IN RMove(AddLai(W1, {r}, K), r, to)
           [] to = "OfflineReplica" -> RMove(RemoveFromIsr(AddStop(W, r, FALSE, K), r, K), r, to)
           [] to = "ReplicaDeletionStarted" -> RMove(AddStop(W, r, TRUE, K), r, to)
           [] to = "NonExistentReplica" ->
                RMove([W EXCEPT !.asg = SelectSeq(W.asg, LAMBDA x : x # r)], r, to)
           [] OTHER -> RMove(W, r, to)

\* The replica state machine applied to a set of replicas, in ascending broker order.
RECURSIVE RsmAll(_, _, _, _)
RsmAll(W, rs, to, K) ==
    IF rs = {} THEN W ELSE LET r == MinOf(rs) IN RsmAll(RsmTo(W, r, to, K), rs \ {r}, to, K)

\* _on_broker_startup / _on_broker_failure for one partition (deletion and reassignment hooks are
\* added by KafkaControllerOps).
Startup(W, brokers, K) ==
    TriggerOnline(Seal(IF W.del THEN W ELSE RsmAll(W, Range(W.asg) \cap brokers, "OnlineReplica", K)), K)

Failure(W, brokers, K) ==
    LET W1 == IF HasNode(W.cache) /\ W.cache.leader \in brokers /\ ~W.del THEN PsmTo(W, "OfflinePartition") ELSE W
        W2 == TriggerOnline(W1, K)
        mine == Range(W2.asg) \cap brokers
    IN IF ~W2.del THEN RsmAll(W2, mine, "OfflineReplica", K)
       ELSE LET failing == {r \in mine : W2.rs[r] # "ReplicaDeletionIneligible"}
            IN IF failing = {} THEN W2
               ELSE [RsmAll(W2, failing, "ReplicaDeletionIneligible", K) EXCEPT !.inel = TRUE]

\* Controller requests.  One record shape for every message to or from a controller; `be` is the
\* broker epoch a controller request is addressed to (Addressed), 0 in every other message.
CtlMsg(type, src, dst, ce, p, n, replicas, delete) ==
    [type |-> type, src |-> src, dst |-> dst, ce |-> ce, p |-> p, leader |-> n.leader, le |-> n.le,
     isr |-> n.isr, pce |-> n.pce, version |-> n.version, replicas |-> replicas, delete |-> delete,
     err |-> "", parts |-> {}, be |-> 0]
ControllerRequests == {"LeaderAndIsr", "UpdateMetadata", "StopReplica"}

(* KIP-380 (Kafka 2.2, KAFKA-7235).  A controller request carries the broker epoch the sender's     *)
(* context holds for its recipient (2.2.0 ControllerChannelManager.scala:                          *)
(* controllerContext.liveBrokerIdAndEpochs(broker)); the broker refuses one older than its own     *)
(* registration, whole, before it reads anything else (2.2.0 KafkaApis.scala isBrokerEpochStale,    *)
(* STALE_BROKER_EPOCH); the controller sees a broker that registered again as bounced.  Before 2.2 *)
(* (BrokerEpoch = FALSE) a request carries no broker epoch and is applied by whichever incarnation *)
(* of the broker it reaches: the controller's send thread retries a request until it gets through  *)
(* (2.1.0 ControllerChannelManager.scala RequestSendThread), so a request sent before a crash, or  *)
(* while the broker is down, reaches the broker's next incarnation unless the controller sees the  *)
(* broker dead first (removeBroker drops its queue); and 2.1.0's BrokerChange compares broker ids  *)
(* only, so a broker that restarted in between is not seen at all.                                 *)
Addressed(m, K) == [m EXCEPT !.be = K.live[m.dst]]
StaleBrokerEpoch(b, m) == BrokerEpochFencing /\ m.be < broker_epoch[b]
\* A controller request is queued for b while b is up; before 2.2 also while it is down (retried).  With
\* KIP-380 a request to a broker that is down could only reach its next incarnation, which refuses it.
Queued(b) == alive[b] \/ ~BrokerEpochFencing
\* What a broker's crash takes off the network: everything to or from it, but before 2.2 the
\* controllers' requests to it, which their send threads retry.
SurvivesCrash(b, m) == m.src # b /\ (m.dst # b \/ (~BrokerEpochFencing /\ m.type \in ControllerRequests))
\* Controller c's queue to the brokers it finds dead while they are down (ControllerChannelManager.
\* removeBroker); only requests kept across a crash before 2.2 can be there.
RemovedQueues(c, dead) == {m \in ctl_msgs : m.src = c /\ m.dst \in dead /\ ~alive[m.dst] /\ m.type \in ControllerRequests}
\* The brokers of a BrokerChange: registered anew, gone, and registered again since the context's view.
NewBrokers(old, live) == {b \in Brokers : old[b] = 0 /\ live[b] # 0}
DeadBrokers(old, live) == {b \in Brokers : old[b] # 0 /\ live[b] = 0}
BouncedBrokers(old, live) ==
    IF BrokerEpochFencing THEN {b \in Brokers : old[b] # 0 /\ live[b] # 0 /\ old[b] # live[b]} ELSE {}
\* The context while bounced brokers fail: without them (2.2.0 KafkaController.scala BrokerChange:
\* removeLiveBrokersAndEpochs, onBrokerFailure, then addLiveBrokersAndEpochs, onBrokerStartup).
Without(K, bounced) == [K EXCEPT !.live = [b \in Brokers |-> IF b \in bounced THEN 0 ELSE K.live[b]]]

\* UpdateMetadata to every live broker (it carries only the controller epoch here).
UmMsgs(c, K) ==
    IF ModelUpdateMetadata
    THEN {Addressed(CtlMsg("UpdateMetadata", c, b, K.ce, CHOOSE q \in Partitions : TRUE, NoNode, <<>>, FALSE), K) :
              b \in LiveOf(K) \cap {x \in Brokers : Queued(x)}}
    ELSE {}

\* The LeaderAndIsr, StopReplica and UpdateMetadata requests of an event (to brokers that are up).
EventMsgs(c, K, Wf) ==
    UmMsgs(c, K) \cup
    {Addressed(CtlMsg("LeaderAndIsr", c, b, K.ce, p, Wf[p].lai[b].n, Wf[p].lai[b].asg, FALSE), K) :
        <<b, p>> \in {<<x, q>> \in Brokers \X Partitions : HasNode(Wf[q].lai[x].n) /\ Queued(x)}}
    \cup
    UNION {{Addressed(CtlMsg("LeaderAndIsr", c, x[1], K.ce, q, x[2].n, x[2].asg, FALSE), K) :
               x \in {y \in Wf[q].sealed : Queued(y[1])}} :
           q \in Partitions}
    \cup
    {Addressed(CtlMsg("StopReplica", c, t[1], K.ce, t[2], NoNode, <<>>, t[3]), K) :
        t \in {<<x, q, d>> \in Brokers \X Partitions \X BOOLEAN : d \in Wf[q].stop[x] /\ Queued(x)}}

Known(c, p) == partition_state[c][p] # "NonExistentPartition"

\* Whether controller c's queue holds an event of this kind: its trigger (the watched store data
\* differs from the context) for a controller in office; for a controller whose session expired
\* (a Reregister event is queued) only the events queued before the expiry, which precede it.
Pending(c, kind) ==
    CASE kind = "BrokerChange" -> ctl_live[c] # registered
      [] kind = "TopicChange" -> \E p \in Partitions : assignment[p] # <<>> /\ ~Known(c, p)
      [] kind = "IsrChangeNotification" -> \E p \in Partitions : Known(c, p) /\ ctl_cache[c][p] # StoreNode(p)
CanHandle(c, kind) ==
    /\ alive[c]
    /\ acting_controller_epoch[c] # 0
    /\ IF reregister[c] THEN kind \in zombie_events[c] ELSE Pending(c, kind)
\* Handling the event takes it off the queue.
TakeEvent(c, kind) == zombie_events' = [zombie_events EXCEPT ![c] = @ \ {kind}]

\* Clear controller c's context (ControllerContext dropped: _resign).
ResignVars(c) ==
    /\ acting_controller_epoch' = [acting_controller_epoch EXCEPT ![c] = 0]
    /\ partition_state' = [partition_state EXCEPT ![c] = EmptyPartitionStates]
    /\ replica_state' = [replica_state EXCEPT ![c] = EmptyReplicaStates]
    /\ ctl_live' = [ctl_live EXCEPT ![c] = NoContext]
    /\ ctl_cache' = [ctl_cache EXCEPT ![c] = EmptyCache]
    /\ zombie_events' = [zombie_events EXCEPT ![c] = {}]

\* The event's first store write failed the controller-epoch check: nothing happened, c resigned.
Aborted(c, Wf) ==
    (\E p \in Partitions : Wf[p].wrote) /\ acting_controller_epoch[c] # controller_epoch /\ FencesControllerWrites

\* StaleControllerFenced (2): a deposed controller's write succeeded (only without fencing).
DeposedWrite(c, Wf) ==
    (\E p \in Partitions : Wf[p].wrote) /\ acting_controller_epoch[c] # controller_epoch /\ ~FencesControllerWrites

\* The history flags after an event with results Wf.
EventFlags(Wf, staleWrite) ==
    [stale     |-> h_flags.stale \/ staleWrite,
     partition |-> h_flags.partition \/ \E p \in Partitions : Wf[p].badp,
     replica   |-> h_flags.replica \/ \E p \in Partitions : Wf[p].badr,
     refused   |-> h_flags.refused \/ \E p \in Partitions : Wf[p].refused]

\* Apply the results Wf of an event of controller c (context K, new live view): the store's partition
\* nodes and assignments, c's context, the requests sent, the flags; or resign if Aborted.
ApplyEventFrom(c, K, Wf, staleWrite, base, extraMsgs) ==
    /\ leader' = [p \in Partitions |-> Wf[p].node.leader]
    /\ leader_epoch' = [p \in Partitions |-> Wf[p].node.le]
    /\ isr' = [p \in Partitions |-> Wf[p].node.isr]
    /\ partition_controller_epoch' = [p \in Partitions |-> Wf[p].node.pce]
    /\ partition_version' = [p \in Partitions |-> Wf[p].node.version]
    /\ assignment' = [p \in Partitions |-> IF Wf[p].asgw THEN Wf[p].asg ELSE assignment[p]]
    /\ ctl_cache' = [ctl_cache EXCEPT ![c] = [p \in Partitions |-> Wf[p].cache]]
    /\ partition_state' = [partition_state EXCEPT ![c] = [p \in Partitions |-> Wf[p].ps]]
    /\ replica_state' = [replica_state EXCEPT ![c] = [p \in Partitions |-> Wf[p].rs]]
    /\ ctl_live' = [ctl_live EXCEPT ![c] = K.live]
    /\ ctl_msgs' = base \cup EventMsgs(c, K, Wf) \cup extraMsgs
    /\ h_flags' = EventFlags(Wf, staleWrite)

ApplyEvent(c, K, Wf, staleWrite) == ApplyEventFrom(c, K, Wf, staleWrite, ctl_msgs, {})

\* Commit an event that also takes the requests `consumed` off the network.
CommitEventFrom(c, K, Wf, kind, consumed) ==
    IF Aborted(c, Wf)
    THEN /\ ResignVars(c)
         /\ UNCHANGED <<store_vars, ctl_msgs, h_flags>>
    ELSE /\ ApplyEventFrom(c, K, Wf, DeposedWrite(c, Wf), ctl_msgs \ consumed, {})
         /\ TakeEvent(c, kind)
         /\ UNCHANGED <<controller, controller_epoch, registered, acting_controller_epoch>>

CommitEvent(c, K, Wf, kind) == CommitEventFrom(c, K, Wf, kind, {})


(***************************************************************************************)
(* Controller actions.                                                                  *)
(***************************************************************************************)

\* Context load on failover (_initialize_states): states read off the store, not reached by
\* transitions, a replica on a dead broker ReplicaDeletionIneligible (Kafka 2.3.0 and 3.9.2
\* ReplicaStateMachine.scala, initializeReplicaState); then every replica on a live broker
\* Online -> Online, every other one -> OfflineReplica, out of the ISR (startup), and an election for
\* every New or Offline partition (controller.py _failover).
LoadWork(p, K) ==
    LET n == StoreNode(p)
        asg == assignment[p]
        liveSet == LiveOf(K)
    IN [node |-> n, cache |-> n,
        ps |-> IF ~HasNode(n) THEN "NewPartition" ELSE IF n.leader \in liveSet THEN "OnlinePartition" ELSE "OfflinePartition",
        rs |-> [r \in Brokers |-> IF r \notin Range(asg) THEN "NonExistentReplica"
                                  ELSE IF r \in liveSet THEN "OnlineReplica" ELSE "ReplicaDeletionIneligible"],
        asg |-> asg, del |-> FALSE, inel |-> FALSE, tgt |-> <<>>,
        lai |-> [x \in Brokers |-> NoLai], sealed |-> {}, stop |-> [x \in Brokers |-> {}],
        wrote |-> FALSE, asgw |-> FALSE, badp |-> FALSE, badr |-> FALSE, refused |-> FALSE]

\* ReplicaStateMachine.startup after the load: every assigned replica, of a topic being deleted too,
\* in two state-machine calls, each sending its own requests (the caller seals the second).
LoadStartup(W, K) ==
    RsmAll(Seal(RsmAll(W, Range(W.asg) \cap LiveOf(K), "OnlineReplica", K)),
           Range(W.asg) \ LiveOf(K), "OfflineReplica", K)

FailoverWork(K) ==
    LET One(p) ==
            IF assignment[p] = <<>>
            THEN [Work(CtlId, p) EXCEPT !.cache = NoNode, !.ps = "NonExistentPartition",
                                        !.rs = [r \in Brokers |-> "NonExistentReplica"]]
            ELSE TriggerOnline(Seal(LoadStartup(LoadWork(p, K), K)), K)
    IN TLCEval([p \in Partitions |-> One(p)])

\* Become controller with epoch controller_epoch + 1 and run the failover (with fresh context).
Elected(b, live) ==
    LET K == Ctx(live, {}, controller_epoch + 1)
        Wf == FailoverWork(K)
    IN /\ controller' = b
       /\ controller_epoch' = K.ce
       /\ acting_controller_epoch' = [acting_controller_epoch EXCEPT ![b] = K.ce]
       /\ zombie_events' = [zombie_events EXCEPT ![b] = {}]
       /\ ApplyEvent(b, K, Wf, FALSE)

(* ControllerElect(b) -- actor broker:b.
   When: b is up and /controller is empty -- b takes its ControllerChange event.  b may have a
   Reregister event queued behind it (its session expired after the watch fired): it then runs
   under its new session, not registered yet, and BrokerReregister later keeps its role.
   Does: if b still acts as a (deposed) controller it resigns first; the multi-op creates
   /controller and bumps /controller_epoch; b loads a fresh context and runs the failover:
   every live replica Online -> Online (a LeaderAndIsr to each), an election for every New or
   Offline partition. *)
ControllerElect(b) ==
    /\ alive[b]
    /\ controller = NoLeader
    /\ controller_epoch < MaxControllerEpoch
    /\ Elected(b, registered)
    /\ UNCHANGED <<registered, broker_vars, replica_vars, msgs, bound_vars>>
    /\ HistoryNext

(* ControllerResign(c) -- actor controller:c (the implementation records it as ControllerElect
   with resigned=true: c takes its ControllerChange event and finds another holder).
   When: c acts as controller and /controller names another broker.
   Does: c drops its context. *)
ControllerResign(c) ==
    /\ alive[c]
    /\ acting_controller_epoch[c] # 0
    /\ controller # c
    /\ controller # NoLeader
    /\ ResignVars(c)
    /\ UNCHANGED <<store_vars, broker_vars, replica_vars, net_vars, bound_vars, h_flags>>
    /\ HistoryNext

\* The context of controller c for an event, with the registered brokers as live view.
EventCtx(c) == Ctx(registered, {}, acting_controller_epoch[c])

(* BrokerChange(c) -- actor controller:c.
   When: c acts as controller (possibly deposed: its session expired and it has not yet taken the
   Reregister event) and the registered brokers differ from its context's live brokers.
   Does: new brokers start up (their replicas Online: LeaderAndIsr), bounced brokers fail and start
   up (with BrokerEpochFencing only: before 2.2 a bounced broker goes unseen), dead brokers fail (c drops
   its queue of requests to them): partitions they led go Offline and get an offline election (first live
   ISR replica in assignment order; with UncleanElection the first live replica, ISR reset to it),
   their replicas go Offline and leave the ISR (epoch + 1).  Every write is a CAS on the partition
   version and, with FencesControllerWrites, conditional on the controller epoch: a deposed
   controller's write fails and it resigns. *)
BrokerChangeWork(c, K) ==
    LET old == ctl_live[c]
        live == K.live
        new == NewBrokers(old, live)
        dead == DeadBrokers(old, live)
        bounced == BouncedBrokers(old, live)
        One(p) ==
            LET W0 == Work(c, p)
                W1 == IF new # {} THEN Startup(W0, new, K) ELSE W0
                W2 == IF bounced # {} THEN Startup(Failure(W1, bounced, Without(K, bounced)), bounced, K) ELSE W1
                W3 == IF dead # {} THEN Failure(W2, dead, K) ELSE W2
            IN IF Known(c, p) THEN W3 ELSE W0
    IN TLCEval([p \in Partitions |-> One(p)])

BrokerChange(c) ==
    /\ CanHandle(c, "BrokerChange")
    /\ CommitEventFrom(c, EventCtx(c), BrokerChangeWork(c, EventCtx(c)), "BrokerChange",
                       RemovedQueues(c, DeadBrokers(ctl_live[c], registered)))
    /\ UNCHANGED <<broker_vars, replica_vars, msgs, bound_vars>>
    /\ HistoryNext

(* TopicChange(c) -- actor controller:c.
   When: c acts as controller and a partition's assignment exists in the store but not in c's context.
   Does: NonExistent -> New for the partition and its replicas, then New -> Online: the first live
   assigned replica leads, every live assigned replica is in the ISR, leader epoch 0 (a Create of the
   state node, conditional on the controller epoch); LeaderAndIsr to the replicas. *)
TopicChangeWork(c, K) ==
    LET One(p) ==
            LET W0 == Work(c, p)
                W1 == RsmAll(PsmTo(W0, "NewPartition"), Range(W0.asg), "NewReplica", K)
                W2 == PsmOnline(W1, "offline", <<>>, K)
            IN RsmAll(W2, Range(W2.asg), "OnlineReplica", K)
    IN TLCEval([p \in Partitions |-> IF assignment[p] # <<>> /\ ~Known(c, p) THEN One(p) ELSE Work(c, p)])

TopicChange(c) ==
    /\ CanHandle(c, "TopicChange")
    /\ CommitEvent(c, Ctx(ctl_live[c], {}, acting_controller_epoch[c]),
                   TopicChangeWork(c, Ctx(ctl_live[c], {}, acting_controller_epoch[c])), "TopicChange")
    /\ UNCHANGED <<broker_vars, replica_vars, msgs, bound_vars>>
    /\ HistoryNext

(* IsrChangeNotification(c) -- actor controller:c.
   When: c acts as controller and its cached node of a partition differs from the store's (a leader
   changed the ISR and left a notification).
   Does: c refreshes its cached nodes (and would send UpdateMetadata, not modelled). *)
IsrChangeNotification(c) ==
    /\ CanHandle(c, "IsrChangeNotification")
    /\ ctl_cache' = [ctl_cache EXCEPT ![c] = [p \in Partitions |-> IF Known(c, p) THEN StoreNode(p) ELSE ctl_cache[c][p]]]
    /\ TakeEvent(c, "IsrChangeNotification")
    /\ ctl_msgs' = ctl_msgs \cup UmMsgs(c, Ctx(ctl_live[c], {}, acting_controller_epoch[c]))
    /\ UNCHANGED <<store_vars, acting_controller_epoch, partition_state, replica_state, ctl_live,
                   broker_vars, replica_vars, msgs, bound_vars, h_flags>>
    /\ HistoryNext

(***************************************************************************************)
(* Environment and admin actions.                                                       *)
(***************************************************************************************)

(* CreateTopic(p) -- actor admin.  Writes the assignment of p (one topic per partition here). *)
CreateTopic(p) ==
    /\ assignment[p] = <<>>
    /\ assignment' = [assignment EXCEPT ![p] = Assignment[p]]
    /\ UNCHANGED <<controller, controller_epoch, leader, leader_epoch, isr, partition_controller_epoch,
                   partition_version, registered, ctl_vars, broker_vars, replica_vars, net_vars, bound_vars, h_flags>>
    /\ HistoryNext

\* What a broker forgets when its process dies (Replica.forget_volatile_state, ReplicaManager.crash).
ForgetReplicas(b) ==
    /\ role' = [role EXCEPT ![b] = [p \in Partitions |-> IF role[b][p] = "absent" THEN "absent" ELSE "none"]]
    /\ local_leader_epoch' = [local_leader_epoch EXCEPT ![b] = [p \in Partitions |-> -1]]
    /\ local_leader' = [local_leader EXCEPT ![b] = [p \in Partitions |-> NoLeader]]
    /\ local_isr' = [local_isr EXCEPT ![b] = [p \in Partitions |-> {}]]
    /\ local_version' = [local_version EXCEPT ![b] = [p \in Partitions |-> -1]]
    /\ hw' = [hw EXCEPT ![b] = [p \in Partitions |-> Min(hw_checkpoint[b][p], Len(log[b][p]))]]
    /\ epoch_start_offset' = [epoch_start_offset EXCEPT ![b] = [p \in Partitions |-> 0]]
    /\ follower_leo' = [follower_leo EXCEPT ![b] = [p \in Partitions |-> [f \in Brokers |-> -2]]]
    /\ truncating' = [truncating EXCEPT ![b] = [p \in Partitions |-> FALSE]]
    /\ inflight' = [inflight EXCEPT ![b] = [p \in Partitions |-> FALSE]]
    /\ UNCHANGED <<log, hw_checkpoint>>

(* BrokerCrash(b) -- actor env.
   When: b is up (and the crash bound allows).
   Does: b's session expires (its /brokers/ids node and, if it holds it, /controller go), its
   controller context and queue are lost, it forgets the controller epoch, every replica forgets
   its role, leader epoch and ISR, and its HW becomes min(checkpoint, log end); logs and HW
   checkpoints stay on disk.  Everything in flight to or from b is lost, but before KIP-380 the
   controllers' requests to b (SurvivesCrash). *)
BrokerCrash(b) ==
    /\ alive[b]
    /\ crashes < MaxCrashes
    /\ crashes' = crashes + 1
    /\ alive' = [alive EXCEPT ![b] = FALSE]
    /\ registered' = [registered EXCEPT ![b] = 0]
    /\ controller' = IF controller = b THEN NoLeader ELSE controller
    /\ ResignVars(b)
    /\ reregister' = [reregister EXCEPT ![b] = FALSE]
    /\ broker_controller_epoch' = [broker_controller_epoch EXCEPT ![b] = 0]
    /\ ForgetReplicas(b)
    /\ ctl_msgs' = {m \in ctl_msgs : SurvivesCrash(b, m)}
    /\ msgs' = {m \in msgs : m.dst # b /\ m.src # b}
    /\ UNCHANGED <<controller_epoch, assignment, leader, leader_epoch, isr, partition_controller_epoch,
                   partition_version, session, broker_epoch, next_record, expiries, h_flags>>
    /\ HistoryNext

(* BrokerRestart(b) -- actor env.
   When: b is down.
   Does: b recovers its logs (HW = min(checkpoint, log end)), opens a new session and registers: the
   session is its new broker epoch. *)
BrokerRestart(b) ==
    /\ ~alive[b]
    /\ alive' = [alive EXCEPT ![b] = TRUE]
    /\ session' = [session EXCEPT ![b] = session[b] + 1]
    /\ registered' = [registered EXCEPT ![b] = session[b] + 1]
    /\ broker_epoch' = [broker_epoch EXCEPT ![b] = session[b] + 1]
    /\ hw' = [hw EXCEPT ![b] = [p \in Partitions |-> Min(hw_checkpoint[b][p], Len(log[b][p]))]]
    /\ UNCHANGED <<controller, controller_epoch, assignment, leader, leader_epoch, isr, partition_controller_epoch,
                   partition_version, ctl_vars, reregister, broker_controller_epoch,
                   role, local_leader_epoch, local_leader, local_isr, local_version, log, hw_checkpoint,
                   epoch_start_offset, follower_leo, truncating, inflight, net_vars, bound_vars, h_flags>>
    /\ HistoryNext

(* SessionExpire(b) -- actor env.
   When: b is up (and the expiry bound allows).
   Does: b's store session expires: its ephemeral /brokers/ids/b node and, if b holds it, /controller
   are deleted.  b's client opens a new session at once, but b only learns of the expiry when it
   takes the Reregister event: until then it keeps acting -- as a deposed (zombie) controller if it
   was the controller -- and its replica manager goes on as before. *)
SessionExpire(b) ==
    /\ alive[b]
    /\ expiries < MaxExpiries
    /\ expiries' = expiries + 1
    /\ registered' = [registered EXCEPT ![b] = 0]
    /\ controller' = IF controller = b THEN NoLeader ELSE controller
    /\ session' = [session EXCEPT ![b] = session[b] + 1]
    /\ reregister' = [reregister EXCEPT ![b] = TRUE]
    /\ zombie_events' = [zombie_events EXCEPT ![b] =
                           IF acting_controller_epoch[b] = 0 \/ reregister[b] THEN zombie_events[b]
                           ELSE {k \in EventKinds : Pending(b, k)}]
    /\ UNCHANGED <<controller_epoch, assignment, leader, leader_epoch, isr, partition_controller_epoch,
                   partition_version, acting_controller_epoch, partition_state, replica_state, ctl_live, ctl_cache,
                   alive, broker_controller_epoch, broker_epoch, replica_vars, net_vars,
                   next_record, crashes, h_flags>>
    /\ HistoryNext

(* BrokerReregister(b) -- actor broker:b.
   When: b is up and has a Reregister event queued.
   Does: b registers /brokers/ids/b with its new session (its new broker epoch); if /controller is empty it runs for
   controller (as ControllerElect); if it holds /controller (won under the new session) it keeps
   its role; otherwise it resigns if it acts as controller. *)
BrokerReregister(b) ==
    /\ alive[b]
    /\ reregister[b]
    /\ reregister' = [reregister EXCEPT ![b] = FALSE]
    /\ LET live == [registered EXCEPT ![b] = session[b]]
       IN /\ registered' = live
          /\ broker_epoch' = [broker_epoch EXCEPT ![b] = session[b]]
          /\ IF controller = NoLeader /\ controller_epoch < MaxControllerEpoch
             THEN Elected(b, live)
             ELSE /\ IF controller = b THEN UNCHANGED ctl_vars ELSE ResignVars(b)
                  /\ UNCHANGED <<controller, controller_epoch, assignment, leader, leader_epoch, isr,
                                 partition_controller_epoch, partition_version, ctl_msgs, h_flags>>
    /\ UNCHANGED <<alive, session, broker_controller_epoch, replica_vars, msgs, bound_vars>>
    /\ HistoryNext

(* DropMessage(net) / LoseMessage(net, m) -- actor network (net: "controller" or "broker").
   When: m is in flight (a controller request, or a request or response between brokers).
   Does: m is lost. *)
LoseMessage(net, m) ==
    /\ IF net = "controller"
       THEN /\ m \in ctl_msgs
            /\ ctl_msgs' = ctl_msgs \ {m}
            /\ UNCHANGED msgs
       ELSE /\ m \in msgs
            /\ msgs' = msgs \ {m}
            /\ UNCHANGED ctl_msgs
    /\ UNCHANGED <<store_vars, ctl_vars, broker_vars, replica_vars, bound_vars, h_flags>>
    /\ HistoryNext

DropMessage(net) == \E m \in (IF net = "controller" THEN ctl_msgs ELSE msgs) : LoseMessage(net, m)

(***************************************************************************************)
(* Brokers: controller requests.                                                        *)
(***************************************************************************************)

\* ReplicaManager._maybe_advance_hw (Design.high_watermark) on a leader's log, HW, ISR and follower positions.
AdvancedHw(b, lg, hwv, isrSet, fleo) ==
    LET own == Len(lg)
        others == isrSet \ {b}
        pos(r) == IF fleo[r] < 0 THEN -1 ELSE fleo[r]
        lowest == IF others = {} THEN own ELSE MinOf({pos(r) : r \in others})
        candidate == Min(own, lowest)
    IN IF candidate > hwv THEN candidate ELSE hwv

(* LeaderAndIsr(b, m) -- actor broker:b.
   When: a LeaderAndIsr request m for b is in flight and b is up.
   Does: with BrokerEpochFencing, a request addressed to an earlier registration of b is refused whole and
   changes nothing (StaleBrokerEpoch).  With RefusesControllerEpoch, a request from a controller epoch older than the newest b has
   seen is rejected whole.  Otherwise b records the epoch; the partition is applied only if b is an
   assigned replica, the request names a leader (Kafka's makeFollowers skips a partition whose leader
   is unavailable) and (with LeaderEpochCheck) the request's leader epoch is newer than the one b
   knows.  Becoming leader: adopt epoch/ISR/version, epoch start offset := log end, follower positions
   unknown, advance the HW.  Becoming follower: adopt, then truncate by the era's rule: to the own HW
   at once (TruncateOnBecomeFollower) or by an OffsetsForLeaderEpoch exchange first (truncating). *)
HandleLeaderAndIsr(b, m) ==
    /\ m.type = "LeaderAndIsr"
    /\ m.dst = b
    /\ alive[b]
    \* (last: a set membership compares whole records)
    /\ m \in ctl_msgs
    /\ ctl_msgs' = ctl_msgs \ {m}
    /\ LET p == m.p
           refused == StaleBrokerEpoch(b, m)
           fenced == RefusesControllerEpoch(m.ce, broker_controller_epoch[b])
           stale == role[b][p] # "absent" /\ RefusesLeaderEpoch(m.le, local_leader_epoch[b][p])
           apply == ~refused /\ ~fenced /\ b \in Range(m.replicas) /\ ~stale /\ m.leader # NoLeader
           lg == log[b][p]
           becomeLeader == m.leader = b
           newLog == IF ~becomeLeader /\ TruncateOnBecomeFollower THEN Prefix(lg, hw[b][p]) ELSE lg
           newFleo == [f \in Brokers |-> IF becomeLeader /\ f \in Range(m.replicas) /\ f # b THEN -1 ELSE -2]
           newHw == IF becomeLeader THEN AdvancedHw(b, lg, hw[b][p], m.isr, newFleo)
                    ELSE Min(hw[b][p], Len(newLog))
       IN /\ broker_controller_epoch' = IF refused \/ fenced THEN broker_controller_epoch
                                        ELSE [broker_controller_epoch EXCEPT ![b] = Max(@, m.ce)]
          /\ h_flags' = [h_flags EXCEPT !.stale = @ \/ (~refused /\ ~fenced /\ m.ce < broker_controller_epoch[b])]
          /\ IF apply
             THEN /\ role' = [role EXCEPT ![b][p] = IF becomeLeader THEN "leader" ELSE "follower"]
                  /\ local_leader_epoch' = [local_leader_epoch EXCEPT ![b][p] = m.le]
                  /\ local_leader' = [local_leader EXCEPT ![b][p] = m.leader]
                  /\ local_isr' = [local_isr EXCEPT ![b][p] = m.isr]
                  /\ local_version' = [local_version EXCEPT ![b][p] = IF becomeLeader THEN m.version ELSE -1]
                  /\ log' = [log EXCEPT ![b][p] = newLog]
                  /\ hw' = [hw EXCEPT ![b][p] = newHw]
                  /\ epoch_start_offset' = [epoch_start_offset EXCEPT ![b][p] = IF becomeLeader THEN Len(lg) ELSE 0]
                  /\ follower_leo' = [follower_leo EXCEPT ![b][p] = newFleo]
                  /\ truncating' = [truncating EXCEPT ![b][p] = ~becomeLeader /\ ~TruncateOnBecomeFollower]
                  /\ inflight' = [inflight EXCEPT ![b][p] = FALSE]
                  /\ UNCHANGED hw_checkpoint
             ELSE UNCHANGED replica_vars
    /\ UNCHANGED <<store_vars, ctl_vars, alive, session, reregister, broker_epoch, msgs, bound_vars>>
    /\ HistoryNext

LeaderAndIsr(b) == \E m \in ctl_msgs : HandleLeaderAndIsr(b, m)


(* UpdateMetadata(b) -- actor broker:b.
   When: an UpdateMetadata request m for b is in flight (models with ModelUpdateMetadata).
   Does: the broker-epoch and controller-epoch fences as for LeaderAndIsr; b records the epoch.  No
   replica changes. *)
HandleUpdateMetadata(b, m) ==
    /\ m.type = "UpdateMetadata"
    /\ m.dst = b
    /\ alive[b]
    /\ m \in ctl_msgs
    /\ ctl_msgs' = ctl_msgs \ {m}
    /\ LET refused == StaleBrokerEpoch(b, m)
           fenced == RefusesControllerEpoch(m.ce, broker_controller_epoch[b])
       IN /\ broker_controller_epoch' = IF refused \/ fenced THEN broker_controller_epoch
                                        ELSE [broker_controller_epoch EXCEPT ![b] = Max(@, m.ce)]
          /\ h_flags' = [h_flags EXCEPT !.stale = @ \/ (~refused /\ ~fenced /\ m.ce < broker_controller_epoch[b])]
    /\ UNCHANGED <<store_vars, ctl_vars, alive, session, reregister, broker_epoch, replica_vars, msgs, bound_vars>>
    /\ HistoryNext

UpdateMetadata(b) == \E m \in ctl_msgs : HandleUpdateMetadata(b, m)

(***************************************************************************************)
(* Brokers: clients, replication, periodic work.                                        *)
(***************************************************************************************)

(* Produce(b, p) -- actor client.
   When: b is up and leads p (role leader), the ISR it knows has at least MinIsr members (acks = -1),
   and the record bound allows.
   Does: appends <<leader epoch, new record id>> and advances the HW. *)
Produce(b, p) ==
    /\ alive[b]
    /\ role[b][p] = "leader"
    /\ local_leader_epoch[b][p] # -1
    /\ AcceptsWrite(Cardinality(local_isr[b][p]))
    /\ next_record < MaxRecords
    /\ next_record' = next_record + 1
    /\ LET lg == Append(log[b][p], <<local_leader_epoch[b][p], next_record + 1>>)
       IN /\ log' = [log EXCEPT ![b][p] = lg]
          /\ hw' = [hw EXCEPT ![b][p] = AdvancedHw(b, lg, hw[b][p], local_isr[b][p], follower_leo[b][p])]
    /\ UNCHANGED <<store_vars, ctl_vars, broker_vars, role, local_leader_epoch, local_leader, local_isr,
                   local_version, hw_checkpoint, epoch_start_offset, follower_leo, truncating, inflight,
                   net_vars, crashes, expiries, h_flags>>
    /\ HistoryNext

(* SendFetch(f, p) -- actor broker:f.
   When: f is up, follows p with a known leader, and has no request outstanding.
   Does: a follower still truncating sends OffsetsForLeaderEpoch(latest epoch of its log, its
   current leader epoch) -- unless its log is empty, then it stops truncating -- otherwise
   Fetch(fetch offset = log end, current leader epoch).  A request to a broker that is down is
   refused (nothing is sent; the follower waits for a Tick). *)
FetchRequestOf(f, p, trunc) ==
    IF trunc
    THEN BMsg("OffsetsForLeaderEpoch", f, local_leader[f][p], p, 0, local_leader_epoch[f][p], LatestEpoch(log[f][p]),
              "", <<>>, 0, 0)
    ELSE BMsg("Fetch", f, local_leader[f][p], p, Len(log[f][p]), local_leader_epoch[f][p], Undefined, "", <<>>, 0, 0)

SendFetch(f, p) ==
    /\ alive[f]
    /\ role[f][p] = "follower"
    /\ local_leader[f][p] # NoLeader
    /\ ~inflight[f][p]
    /\ LET trunc == truncating[f][p] /\ log[f][p] # <<>>
       IN /\ truncating' = [truncating EXCEPT ![f][p] = trunc]
          /\ inflight' = [inflight EXCEPT ![f][p] = TRUE]
          /\ msgs' = IF alive[local_leader[f][p]] THEN msgs \cup {FetchRequestOf(f, p, trunc)} ELSE msgs
    /\ UNCHANGED <<store_vars, ctl_vars, broker_vars, role, local_leader_epoch, local_leader, local_isr,
                   local_version, log, hw, hw_checkpoint, epoch_start_offset, follower_leo, ctl_msgs,
                   bound_vars, h_flags>>
    /\ HistoryNext

\* ReplicaManager._fence_error: "" or an error.
FenceError(l, p, cle) ==
    IF role[l][p] # "leader" \/ local_leader_epoch[l][p] = -1 THEN "NOT_LEADER"
    ELSE IF FenceCurrentLeaderEpoch /\ cle # local_leader_epoch[l][p] THEN "FENCED_LEADER_EPOCH"
    ELSE ""

(* Fetch(l, m) -- actor broker:l (the leader side of a fetch).
   When: a Fetch request m to l is in flight and l is up.
   Does: errors: NOT_LEADER if l does not lead p; with FenceCurrentLeaderEpoch, FENCED if the
   request's current leader epoch is not l's; OFFSET_OUT_OF_RANGE beyond l's log end.  Otherwise l
   records the follower's position; a follower outside the ISR that is in sync by the era's rule
   (InSyncForExpansion: fetch offset >= HW, and from KIP-320 on >= the epoch start offset) joins
   the ISR through a CAS on the partition node (the ISR expand step); the HW advances; the response
   carries up to MaxFetchRecords records from the fetch offset, the HW and the log end. *)
HandleFetch(l, m) ==
    /\ m.type = "Fetch"
    /\ m.dst = l
    /\ alive[l]
    /\ m \in msgs
    /\ LET p == m.p
           f == m.src
           lg == log[l][p]
           err0 == FenceError(l, p, m.cle)
           err == IF err0 = "" /\ m.offset > Len(lg) THEN "OFFSET_OUT_OF_RANGE" ELSE err0
           known == follower_leo[l][p][f] # -2
           fleo1 == IF known THEN [follower_leo[l][p] EXCEPT ![f] = m.offset] ELSE follower_leo[l][p]
           expand == known /\ f \notin local_isr[l][p]
                     /\ InSyncForExpansion(m.offset, hw[l][p], epoch_start_offset[l][p])
                     /\ local_version[l][p] = partition_version[p] /\ partition_version[p] # -1
           isr1 == IF expand THEN local_isr[l][p] \cup {f} ELSE local_isr[l][p]
           hw1 == IF known THEN AdvancedHw(l, lg, hw[l][p], isr1, fleo1) ELSE hw[l][p]
           resp == IF err # ""
                   THEN BMsg("FetchResponse", l, f, p, m.offset, m.cle, Undefined, err, <<>>, 0,
                             IF role[l][p] = "absent" THEN 0 ELSE Len(lg))
                   ELSE BMsg("FetchResponse", l, f, p, m.offset, m.cle, Undefined, "",
                             SubSeq(lg, m.offset + 1, Min(Len(lg), m.offset + MaxFetchRecords)), hw1, Len(lg))
       IN /\ msgs' = (msgs \ {m}) \cup {resp}
          /\ IF err = ""
             THEN /\ follower_leo' = [follower_leo EXCEPT ![l][p] = fleo1]
                  /\ hw' = [hw EXCEPT ![l][p] = hw1]
                  /\ local_isr' = [local_isr EXCEPT ![l][p] = isr1]
                  /\ IF expand
                     THEN /\ isr' = [isr EXCEPT ![p] = isr1]
                          /\ partition_version' = [partition_version EXCEPT ![p] = @ + 1]
                          /\ local_version' = [local_version EXCEPT ![l][p] = @ + 1]
                     ELSE UNCHANGED <<isr, partition_version, local_version>>
             ELSE UNCHANGED <<follower_leo, hw, local_isr, isr, partition_version, local_version>>
    /\ UNCHANGED <<controller, controller_epoch, assignment, leader, leader_epoch, partition_controller_epoch,
                   registered, ctl_vars, broker_vars, role, local_leader_epoch, local_leader, log,
                   hw_checkpoint, epoch_start_offset, truncating, inflight, ctl_msgs, bound_vars, h_flags>>
    /\ HistoryNext

Fetch(l) == \E m \in msgs : HandleFetch(l, m)


\* The follower's check that a response is for its current state (_current_follower).
CurrentFollower(f, p, cle) == role[f][p] = "follower" /\ local_leader_epoch[f][p] = cle

(* FetchResponse(f, m) -- actor broker:f.
   When: a FetchResponse m to f is in flight (f is up: a crash drops it).
   Does: ignored unless f still follows p in the request's leader epoch (then the request no longer
   counts as outstanding); ignored while truncating; OFFSET_OUT_OF_RANGE with a shorter leader log
   truncates to the leader's log end; other errors, or a log end that moved, are ignored; otherwise
   the records are appended and HW := min(leader HW, log end). *)
HandleFetchResponse(f, m) ==
    /\ m.type = "FetchResponse"
    /\ m.dst = f
    /\ alive[f]
    /\ m \in msgs
    /\ msgs' = msgs \ {m}
    /\ LET p == m.p
           lg == log[f][p]
           current == CurrentFollower(f, p, m.cle)
           outOfRange == m.err = "OFFSET_OUT_OF_RANGE" /\ Len(lg) > m.leo
           accept == m.err = "" /\ m.offset = Len(lg)
           lg1 == IF outOfRange THEN Prefix(lg, m.leo) ELSE lg \o m.records
       IN IF current
          THEN /\ inflight' = [inflight EXCEPT ![f][p] = FALSE]
               /\ IF ~truncating[f][p] /\ (outOfRange \/ accept)
                  THEN /\ log' = [log EXCEPT ![f][p] = lg1]
                       /\ hw' = [hw EXCEPT ![f][p] = IF outOfRange THEN Min(hw[f][p], Len(lg1))
                                                      ELSE Min(m.hwm, Len(lg1))]
                  ELSE UNCHANGED <<log, hw>>
          ELSE UNCHANGED <<inflight, log, hw>>
    /\ UNCHANGED <<store_vars, ctl_vars, broker_vars, role, local_leader_epoch, local_leader, local_isr,
                   local_version, hw_checkpoint, epoch_start_offset, follower_leo, truncating,
                   ctl_msgs, bound_vars, h_flags>>
    /\ HistoryNext

FetchResponse(f) == \E m \in msgs : HandleFetchResponse(f, m)


(* OffsetsForLeaderEpoch(l, m) -- actor broker:l.
   When: an OffsetsForLeaderEpoch request m to l is in flight and l is up.
   Does: with no error (as for Fetch), answers by the era's rule (EpochEndAnswer): KIP-101 the end
   offset of the requested epoch; KIP-279 on the largest epoch not newer than the requested one and
   its end offset.  No change to l. *)
HandleOffsetsForLeaderEpoch(l, m) ==
    /\ m.type = "OffsetsForLeaderEpoch"
    /\ m.dst = l
    /\ alive[l]
    /\ m \in msgs
    /\ LET p == m.p
           err == FenceError(l, p, m.cle)
           ans == IF err = "" THEN EpochEndAnswer(log[l][p], m.epoch, local_leader_epoch[l][p]) ELSE <<Undefined, -1>>
       IN msgs' = (msgs \ {m}) \cup
                  {BMsg("OffsetsForLeaderEpochResponse", l, m.src, p, 0, m.cle, ans[1], err, <<>>, 0, ans[2])}
    /\ UNCHANGED <<store_vars, ctl_vars, broker_vars, replica_vars, ctl_msgs, bound_vars, h_flags>>
    /\ HistoryNext

OffsetsForLeaderEpoch(l) == \E m \in msgs : HandleOffsetsForLeaderEpoch(l, m)


(* OffsetsForLeaderEpochResponse(f, m) -- actor broker:f.
   When: such a response m to f is in flight.
   Does: unless f moved on (role or leader epoch), is no longer truncating, or the answer is an
   error: truncate to the HW if the leader knows no epoch, else to the era's TruncationOffset; stop
   truncating (the next SendFetch fetches). *)
HandleOffsetsForLeaderEpochResponse(f, m) ==
    /\ m.type = "OffsetsForLeaderEpochResponse"
    /\ m.dst = f
    /\ alive[f]
    /\ m \in msgs
    /\ msgs' = msgs \ {m}
    /\ LET p == m.p
           lg == log[f][p]
           current == CurrentFollower(f, p, m.cle)
           offset == IF m.epoch = Undefined THEN hw[f][p] ELSE TruncationOffset(lg, m.epoch, m.leo)
           lg1 == Prefix(lg, offset)
       IN IF current
          THEN /\ inflight' = [inflight EXCEPT ![f][p] = FALSE]
               /\ IF truncating[f][p] /\ m.err = ""
                  THEN /\ log' = [log EXCEPT ![f][p] = lg1]
                       /\ hw' = [hw EXCEPT ![f][p] = Min(hw[f][p], Len(lg1))]
                       /\ truncating' = [truncating EXCEPT ![f][p] = FALSE]
                  ELSE UNCHANGED <<log, hw, truncating>>
          ELSE UNCHANGED <<inflight, log, hw, truncating>>
    /\ UNCHANGED <<store_vars, ctl_vars, broker_vars, role, local_leader_epoch, local_leader, local_isr,
                   local_version, hw_checkpoint, epoch_start_offset, follower_leo, ctl_msgs, bound_vars, h_flags>>
    /\ HistoryNext

OffsetsForLeaderEpochResponse(f) == \E m \in msgs : HandleOffsetsForLeaderEpochResponse(f, m)


(* IsrShrink(b, p, laggards) -- actor broker:b.
   When: b is up and leads p, and `laggards` is a nonempty set of ISR followers that have not caught
   up for too long (time is abstract: any ISR follower may lag), and b's known partition version is
   the store's (the CAS succeeds; a failed CAS changes nothing).
   Does: writes ISR \ laggards to the store (the partition's leader and epoch unchanged), leaves an
   ISR change notification, and advances the HW. *)
IsrShrink(b, p, laggards) ==
    /\ alive[b]
    /\ role[b][p] = "leader"
    /\ local_leader_epoch[b][p] # -1
    /\ laggards # {}
    /\ laggards \subseteq local_isr[b][p] \ {b}
    /\ local_version[b][p] = partition_version[p]
    /\ partition_version[p] # -1
    /\ LET isr1 == local_isr[b][p] \ laggards
       IN /\ isr' = [isr EXCEPT ![p] = isr1]
          /\ partition_version' = [partition_version EXCEPT ![p] = @ + 1]
          /\ local_isr' = [local_isr EXCEPT ![b][p] = isr1]
          /\ local_version' = [local_version EXCEPT ![b][p] = @ + 1]
          /\ hw' = [hw EXCEPT ![b][p] = AdvancedHw(b, log[b][p], hw[b][p], isr1, follower_leo[b][p])]
    /\ UNCHANGED <<controller, controller_epoch, assignment, leader, leader_epoch, partition_controller_epoch,
                   registered, ctl_vars, broker_vars, role, local_leader_epoch, local_leader, log,
                   hw_checkpoint, epoch_start_offset, follower_leo, truncating, inflight, net_vars,
                   bound_vars, h_flags>>
    /\ HistoryNext

(* HwCheckpoint(b) -- actor broker:b.
   When: b is up and some replica's HW differs from its checkpoint.
   Does: every replica's HW is written to the checkpoint file. *)
HwCheckpoint(b) ==
    /\ alive[b]
    /\ \E p \in Partitions : role[b][p] # "absent" /\ hw_checkpoint[b][p] # hw[b][p]
    /\ hw_checkpoint' = [hw_checkpoint EXCEPT ![b] = [p \in Partitions |-> IF role[b][p] = "absent" THEN @[p] ELSE hw[b][p]]]
    /\ UNCHANGED <<store_vars, ctl_vars, broker_vars, role, local_leader_epoch, local_leader, local_isr,
                   local_version, log, hw, epoch_start_offset, follower_leo, truncating, inflight,
                   net_vars, bound_vars, h_flags>>
    /\ HistoryNext

(* Tick(f, p) -- actor clock.
   When: f's request for p is outstanding but nothing of it is in flight any more (it was lost or
   refused).
   Does: the request times out (expire_requests); f may send again. *)
Tick(f, p) ==
    /\ alive[f]
    /\ inflight[f][p]
    /\ ~\E m \in msgs : m.p = p /\ ((m.src = f /\ m.type \in {"Fetch", "OffsetsForLeaderEpoch"})
                                    \/ (m.dst = f /\ m.type \in {"FetchResponse", "OffsetsForLeaderEpochResponse"}))
    /\ inflight' = [inflight EXCEPT ![f][p] = FALSE]
    /\ UNCHANGED <<store_vars, ctl_vars, broker_vars, role, local_leader_epoch, local_leader, local_isr,
                   local_version, log, hw, hw_checkpoint, epoch_start_offset, follower_leo, truncating,
                   net_vars, bound_vars, h_flags>>
    /\ HistoryNext

(***************************************************************************************)
(* Fused fetch rounds: SendFetch, the leader's handling and the follower's handling of  *)
(* the response as ONE step (a behaviour of the split actions, with nothing in between).*)
(* Used by the reproduction models to keep traces short; the split actions are the      *)
(* protocol (and what trace validation matches).                                        *)
(***************************************************************************************)
FetchRound(f, p) ==
    /\ alive[f]
    /\ role[f][p] = "follower"
    /\ local_leader[f][p] # NoLeader
    /\ ~inflight[f][p]
    /\ alive[local_leader[f][p]]
    /\ ~(truncating[f][p] /\ log[f][p] # <<>>)
    /\ LET l == local_leader[f][p]
           m == FetchRequestOf(f, p, FALSE)
           lg == log[l][p]
           err0 == FenceError(l, p, m.cle)
           err == IF err0 = "" /\ m.offset > Len(lg) THEN "OFFSET_OUT_OF_RANGE" ELSE err0
           known == follower_leo[l][p][f] # -2
           fleo1 == IF known THEN [follower_leo[l][p] EXCEPT ![f] = m.offset] ELSE follower_leo[l][p]
           expand == known /\ f \notin local_isr[l][p]
                     /\ InSyncForExpansion(m.offset, hw[l][p], epoch_start_offset[l][p])
                     /\ local_version[l][p] = partition_version[p] /\ partition_version[p] # -1
           isr1 == IF expand THEN local_isr[l][p] \cup {f} ELSE local_isr[l][p]
           hw1 == IF known THEN AdvancedHw(l, lg, hw[l][p], isr1, fleo1) ELSE hw[l][p]
           leo == IF role[l][p] = "absent" THEN 0 ELSE Len(lg)
           flg == log[f][p]
           outOfRange == err = "OFFSET_OUT_OF_RANGE" /\ Len(flg) > leo
           records == SubSeq(lg, m.offset + 1, Min(Len(lg), m.offset + MaxFetchRecords))
           flg1 == IF outOfRange THEN Prefix(flg, leo) ELSE flg \o records
       IN /\ truncating' = [truncating EXCEPT ![f][p] = FALSE]
          /\ IF err = ""
             THEN /\ follower_leo' = [follower_leo EXCEPT ![l][p] = fleo1]
                  /\ local_isr' = [local_isr EXCEPT ![l][p] = isr1]
                  /\ log' = [log EXCEPT ![f][p] = flg1]
                  /\ hw' = [hw EXCEPT ![l][p] = hw1, ![f][p] = Min(hw1, Len(flg1))]
                  /\ IF expand
                     THEN /\ isr' = [isr EXCEPT ![p] = isr1]
                          /\ partition_version' = [partition_version EXCEPT ![p] = @ + 1]
                          /\ local_version' = [local_version EXCEPT ![l][p] = @ + 1]
                     ELSE UNCHANGED <<isr, partition_version, local_version>>
             ELSE /\ log' = [log EXCEPT ![f][p] = IF outOfRange THEN Prefix(flg, leo) ELSE flg]
                  /\ hw' = [hw EXCEPT ![f][p] = IF outOfRange THEN Min(hw[f][p], leo) ELSE hw[f][p]]
                  /\ UNCHANGED <<follower_leo, local_isr, isr, partition_version, local_version>>
    /\ UNCHANGED <<controller, controller_epoch, assignment, leader, leader_epoch, partition_controller_epoch,
                   registered, ctl_vars, broker_vars, role, local_leader_epoch, local_leader,
                   hw_checkpoint, epoch_start_offset, inflight, net_vars, bound_vars, h_flags>>
    /\ HistoryNext

\* SendFetch of OffsetsForLeaderEpoch, the leader's answer and the follower's truncation, fused.
TruncationRound(f, p) ==
    /\ alive[f]
    /\ role[f][p] = "follower"
    /\ local_leader[f][p] # NoLeader
    /\ ~inflight[f][p]
    /\ alive[local_leader[f][p]]
    /\ truncating[f][p]
    /\ log[f][p] # <<>>
    /\ LET l == local_leader[f][p]
           lg == log[f][p]
           err == FenceError(l, p, local_leader_epoch[f][p])
           ans == IF err = "" THEN EpochEndAnswer(log[l][p], LatestEpoch(lg), local_leader_epoch[l][p]) ELSE <<Undefined, -1>>
           offset == IF ans[1] = Undefined THEN hw[f][p] ELSE TruncationOffset(lg, ans[1], ans[2])
           lg1 == Prefix(lg, offset)
       IN IF err = ""
          THEN /\ log' = [log EXCEPT ![f][p] = lg1]
               /\ hw' = [hw EXCEPT ![f][p] = Min(hw[f][p], Len(lg1))]
               /\ truncating' = [truncating EXCEPT ![f][p] = FALSE]
          ELSE FALSE   \* an error changes nothing: a stutter
    /\ UNCHANGED <<store_vars, ctl_vars, broker_vars, role, local_leader_epoch, local_leader, local_isr,
                   local_version, hw_checkpoint, epoch_start_offset, follower_leo, inflight, net_vars,
                   bound_vars, h_flags>>
    /\ HistoryNext

(***************************************************************************************)
(* Next-state relations.                                                                *)
(***************************************************************************************)
\* Every action conjoins HistoryNext (the history update), so that TLC names each step of a
\* counterexample by its action.
ControllerNext ==
    \/ \E b \in Brokers : ControllerElect(b)
    \/ \E c \in Brokers : ControllerResign(c)
    \/ \E c \in Brokers : BrokerChange(c)
    \/ \E c \in Brokers : TopicChange(c)
    \/ \E c \in Brokers : IsrChangeNotification(c)

CrashNext ==
    \/ \E b \in Brokers : BrokerCrash(b)
    \/ \E b \in Brokers : BrokerRestart(b)

ExpiryNext ==
    \/ \E b \in Brokers : SessionExpire(b)
    \/ \E b \in Brokers : BrokerReregister(b)

EnvNext ==
    \/ \E p \in Partitions : CreateTopic(p)
    \/ CrashNext
    \/ ExpiryNext

ControllerRequestsNext ==
    \E b \in Brokers : LeaderAndIsr(b)

ControllerDropNext ==
    DropMessage("controller")

BrokerDropNext ==
    DropMessage("broker")

NetworkNext == ControllerDropNext \/ BrokerDropNext

MetadataNext ==
    \E b \in Brokers : UpdateMetadata(b)

ProduceNext == \E b \in Brokers, p \in Partitions : Produce(b, p)
CheckpointNext == \E b \in Brokers : HwCheckpoint(b)
\* Only the nonempty sets of other brokers can be laggards (IsrShrink): the others are not enumerated.
ShrinkNext == \E b \in Brokers, p \in Partitions : \E s \in SUBSET (Brokers \ {b}) \ {{}} : IsrShrink(b, p, s)

\* Replication with the split fetch protocol (what the implementation does).
FetchNext ==
    \/ \E b \in Brokers, p \in Partitions : SendFetch(b, p)
    \/ \E b \in Brokers, p \in Partitions : Tick(b, p)
    \/ \E b \in Brokers : Fetch(b)
    \/ \E b \in Brokers : FetchResponse(b)
    \/ \E b \in Brokers : OffsetsForLeaderEpoch(b)
    \/ \E b \in Brokers : OffsetsForLeaderEpochResponse(b)

ReplicationNext == ProduceNext \/ FetchNext \/ CheckpointNext \/ ShrinkNext

\* Replication with fused fetch rounds.
FusedFetchNext ==
    \/ \E b \in Brokers, p \in Partitions : FetchRound(b, p)
    \/ \E b \in Brokers, p \in Partitions : TruncationRound(b, p)

FusedReplicationNext == ProduceNext \/ FusedFetchNext \/ CheckpointNext \/ ShrinkNext

\* The whole protocol.
Next ==
    \/ ControllerNext \/ EnvNext \/ ControllerRequestsNext \/ NetworkNext \/ MetadataNext \/ ReplicationNext

Spec == InitEmpty /\ [][Next]_vars

\* The state constraint every model uses to bound leader epochs and node versions (every ISR
\* change by a leader bumps the version without a new leader epoch: shrink/expand cycles would
\* otherwise make the state space infinite).
EpochBound ==
    \A p \in Partitions : leader_epoch[p] <= MaxLeaderEpoch /\ partition_version[p] <= 2 * MaxLeaderEpoch + 2
=============================================================================
