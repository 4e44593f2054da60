------------------------------ MODULE KafkaInvariants ------------------------------
(***************************************************************************************)
(* TypeOK and the twelve invariants of kcm (docs/invariants.md), with their exact names.*)
(*                                                                                     *)
(* State properties are predicates on the state.  Step and history properties are       *)
(* state predicates over the history variables of KafkaReplication:                     *)
(*   h_leaders    every <<leader epoch, broker>> ever named leader (store or broker);   *)
(*   h_committed  the committed prefix C(p);                                            *)
(*   h_exposed_hw the highest HW exposed by a current leader in an earlier state;       *)
(*   h_violations names of step properties some step broke (HistoryNext compares each   *)
(*                state with its successor);                                            *)
(*   h_flags      what the actions themselves record (stale controller requests applied, *)
(*                deposed controllers' writes, state-machine transitions).              *)
(* A violated step property is thus reported in the state right after the step.         *)
(***************************************************************************************)
EXTENDS KafkaReplication

Node == [leader : {NoLeader} \cup Brokers, le : Int, isr : SUBSET Brokers, pce : Nat, version : Int]
Entry == Int \X Nat

TypeOK ==
    /\ controller \in {NoLeader} \cup Brokers
    /\ controller_epoch \in Nat
    /\ \A p \in Partitions : assignment[p] \in {<<>>, Assignment[p]} \/ Range(assignment[p]) \subseteq Brokers
    /\ leader \in [Partitions -> {NoLeader} \cup Brokers]
    /\ leader_epoch \in [Partitions -> Int] /\ \A p \in Partitions : leader_epoch[p] >= -1
    /\ isr \in [Partitions -> SUBSET Brokers]
    /\ partition_controller_epoch \in [Partitions -> Nat]
    /\ partition_version \in [Partitions -> Int]
    /\ registered \in [Brokers -> Nat]
    /\ acting_controller_epoch \in [Brokers -> Nat]
    /\ partition_state \in [Brokers -> [Partitions -> PartitionStates]]
    /\ replica_state \in [Brokers -> [Partitions -> [Brokers -> ReplicaStates]]]
    /\ ctl_live \in [Brokers -> [Brokers -> Nat]]
    /\ \A c \in Brokers, p \in Partitions : ctl_cache[c][p] \in Node
    /\ alive \in [Brokers -> BOOLEAN]
    /\ session \in [Brokers -> Nat]
    /\ reregister \in [Brokers -> BOOLEAN]
    /\ broker_controller_epoch \in [Brokers -> Nat]
    /\ broker_epoch \in [Brokers -> Nat]
    /\ role \in [Brokers -> [Partitions -> {"leader", "follower", "none", "absent"}]]
    /\ local_leader_epoch \in [Brokers -> [Partitions -> Int]]
    /\ local_leader \in [Brokers -> [Partitions -> {NoLeader} \cup Brokers]]
    /\ local_isr \in [Brokers -> [Partitions -> SUBSET Brokers]]
    /\ local_version \in [Brokers -> [Partitions -> Int]]
    /\ \A b \in Brokers, p \in Partitions : \A i \in 1..Len(log[b][p]) : log[b][p][i] \in Entry
    /\ hw \in [Brokers -> [Partitions -> Nat]]
    /\ hw_checkpoint \in [Brokers -> [Partitions -> Nat]]
    /\ epoch_start_offset \in [Brokers -> [Partitions -> Nat]]
    /\ follower_leo \in [Brokers -> [Partitions -> [Brokers -> Int]]]
    /\ truncating \in [Brokers -> [Partitions -> BOOLEAN]]
    /\ inflight \in [Brokers -> [Partitions -> BOOLEAN]]
    /\ \A m \in ctl_msgs : m.dst \in Brokers /\ m.p \in Partitions
    /\ \A m \in msgs : m.type \in {"Fetch", "FetchResponse", "OffsetsForLeaderEpoch", "OffsetsForLeaderEpochResponse"}
    /\ next_record \in 0..MaxRecords
    /\ h_flags \in [stale : BOOLEAN, partition : BOOLEAN, replica : BOOLEAN, refused : BOOLEAN]

(* OneLeaderPerEpoch (history): for every partition and leader epoch, at most one broker is ever
   named leader, by the store or by a broker leading it in that epoch. *)
OneLeaderPerEpoch ==
    \A p \in Partitions : \A x, y \in h_leaders[p] : x[1] = y[1] => x[2] = y[2]

(* IsrSubsetOfReplicas (state): isr[p] is a subset of assignment[p] where both exist. *)
IsrSubsetOfReplicas ==
    \A p \in Partitions : (assignment[p] # <<>> /\ leader_epoch[p] # -1) => isr[p] \subseteq Range(assignment[p])

(* LeaderInIsr (state): the store's leader is in the store's ISR. *)
LeaderInIsr ==
    \A p \in Partitions : leader[p] = NoLeader \/ leader[p] \in isr[p]

(* HighWatermarkMonotonic/PerLeaderEpoch (step): while a broker leads p in one epoch its HW never
   decreases (the tenure ends with the role, the epoch, or a crash, which clears the role). *)
HighWatermarkMonotonicPerLeaderEpoch ==
    "HighWatermarkMonotonicPerLeaderEpoch" \notin h_violations

(* HighWatermarkMonotonic/AcrossLeaders (history): the HW exposed by the current leader of p never
   goes below the highest HW exposed by an earlier current leader (a KIP-320 leader withholds its
   HW until it reached its epoch start offset: ExposesHw). *)
HighWatermarkMonotonicAcrossLeaders ==
    \A p \in Partitions : LET e == ExposedHw(p) IN e = -1 \/ e >= h_exposed_hw[p]

HighWatermarkMonotonic == HighWatermarkMonotonicPerLeaderEpoch /\ HighWatermarkMonotonicAcrossLeaders

(* HighWatermarkWithinLog (state): no broker's HW of p passes the end of its log of p (Kafka 2.4.0
   Log.updateHighWatermark bounds it by the log end offset, and updateLogEndOffset lowers it on a
   truncation; 2.3.0 only warned, in ReplicaFetcherThread.truncate). *)
HighWatermarkWithinLog ==
    \A b \in Brokers : \A p \in Partitions : hw[b][p] <= Len(log[b][p])

(* NoCommittedDataLoss (history): records below a leader's HW are committed and form a prefix C(p)
   (a leader committing a conflicting prefix is a violation); the log of the current leader and of
   every ISR member that holds a log starts with C(p). *)
CommittedHolders(p) == (isr[p] \cup {CurrentLeader(p)}) \ {NoLeader}
NoCommittedDataLoss ==
    /\ "NoCommittedDataLoss" \notin h_violations
    /\ \A p \in Partitions : \A b \in CommittedHolders(p) :
          role[b][p] # "absent" => IsPrefix(h_committed[p], log[b][p])

(* ReplicaLogsAgree (state): any two logs of p agree below the lower of both HWs and log ends.
   (The relation is symmetric and holds of a log and itself, or of equal logs: each pair of brokers is
   read once, b1 < b2, and equal logs are not cut.) *)
ReplicaLogsAgree ==
    \A p \in Partitions : \A b1, b2 \in Brokers :
        (b1 < b2 /\ role[b1][p] # "absent" /\ role[b2][p] # "absent" /\ log[b1][p] # log[b2][p]) =>
            LET k == Min(Min(hw[b1][p], hw[b2][p]), Min(Len(log[b1][p]), Len(log[b2][p])))
            IN SubSeq(log[b1][p], 1, k) = SubSeq(log[b2][p], 1, k)

(* ControllerEpochMonotonic (step): controller_epoch never decreases, and rises at the step that
   fills /controller (one multi-op, Kafka 2.3.0 KafkaZkClient.registerControllerAndIncrementControllerEpoch); a broker's
   broker_controller_epoch never decreases while it stays up. *)
ControllerEpochMonotonic == "ControllerEpochMonotonic" \notin h_violations

(* LeaderEpochMonotonic (step): leader_epoch[p] never decreases while p exists;
   local_leader_epoch[b][p] never decreases while b holds it (a crash forgets it). *)
LeaderEpochMonotonic == "LeaderEpochMonotonic" \notin h_violations

(* StaleControllerFenced (step): (1) no broker applies a controller request (LeaderAndIsr,
   UpdateMetadata) from a controller epoch older than the newest it has seen; (2) no store write of
   a deposed controller (acting_controller_epoch # controller_epoch) succeeds. *)
StaleControllerFenced == ~h_flags.stale

(* ValidPartitionTransitions / ValidReplicaTransitions (step): every state-machine transition a
   controller performs is allowed by the valid-previous-state tables, starting from the state
   before and chaining (the spec's state machines record each transition they perform; context
   loads in ControllerElect/BrokerReregister read states off the store, resignations drop them). *)
ValidPartitionTransitions == ~h_flags.partition
ValidReplicaTransitions == ~h_flags.replica

(* Informational, not one of the twelve: no controller ever asks its state machines for a
   transition the tables forbid (Kafka logs and refuses such requests). *)
NoRefusedTransitions == ~h_flags.refused

(***************************************************************************************)
(* The data lemmas: the conjuncts of the Z3 data proof's inductive invariant that the   *)
(* spec's variables express, under the same names (docs/z3.md, "The data proof"; the Z3 *)
(* form is spec/z3/data.py).  Offsets here are TLA+ indices (offset + 1).               *)
(***************************************************************************************)
Epoch(lg, i) == lg[i][1]

(* EpochsMonotone: leader epochs never decrease along a log. *)
EpochsMonotone ==
    \A b \in Brokers, p \in Partitions : \A i, j \in 1..Len(log[b][p]) :
        i <= j => Epoch(log[b][p], i) <= Epoch(log[b][p], j)

(* LogMatching: two logs with the same epoch at an offset hold the same entries up to it.  (Symmetric,
   and true of equal logs: each pair of brokers with different logs is read once, x < y.) *)
LogMatching ==
    \A x, y \in Brokers, p \in Partitions : (x < y /\ log[x][p] # log[y][p]) =>
      \A i \in 1..Min(Len(log[x][p]), Len(log[y][p])) :
        Epoch(log[x][p], i) = Epoch(log[y][p], i) => SubSeq(log[x][p], 1, i) = SubSeq(log[y][p], 1, i)

(* EpochPrefix: an entry of epoch e at offset i in one log and an entry of e at an offset j >= i in
   another: both logs agree up to offset i (every entry of e comes from e's leader, whose log only grows
   while it leads e).  (True of equal logs, which are skipped.) *)
EpochPrefix ==
    \A x, y \in Brokers, p \in Partitions : log[x][p] # log[y][p] =>
        \A i \in 1..Len(log[x][p]), j \in 1..Len(log[y][p]) :
            (i <= j /\ Epoch(log[x][p], i) = Epoch(log[y][p], j)) => SubSeq(log[x][p], 1, i) = SubSeq(log[y][p], 1, i)

(* LeaderHoldsItsEpoch: a broker leading in epoch e holds every entry of epoch e of every log. *)
LeaderHoldsItsEpoch ==
    \A l, x \in Brokers, p \in Partitions :
        role[l][p] = "leader" =>
            \A i \in 1..Len(log[x][p]) :
                Epoch(log[x][p], i) = local_leader_epoch[l][p] => i <= Len(log[l][p]) /\ log[l][p][i] = log[x][p][i]

(* EpochStartOffset: a leader's log holds no epoch above its own, and only its own from its epoch start
   offset on (below it, entries of its own epoch are possible: a leader that crashed and restarted may be
   sent its old epoch again, and its log kept what it wrote then). *)
EpochStartOffset ==
    \A l \in Brokers, p \in Partitions :
        role[l][p] = "leader" =>
            \A i \in 1..Len(log[l][p]) :
                /\ Epoch(log[l][p], i) <= local_leader_epoch[l][p]
                /\ i > epoch_start_offset[l][p] => Epoch(log[l][p], i) = local_leader_epoch[l][p]

(* FollowerIsPrefix: a follower done truncating is a prefix of its leader's log while both are in one epoch. *)
FollowerIsPrefix ==
    \A f \in Brokers, p \in Partitions :
        (role[f][p] = "follower" /\ ~truncating[f][p]) =>
            \* the only leader l the follower can have: the one it knows
            LET l == local_leader[f][p]
            IN (/\ l \in Brokers
                /\ role[l][p] = "leader" /\ local_leader_epoch[l][p] = local_leader_epoch[f][p])
                  => IsPrefix(log[f][p], log[l][p])

(* FetchedPrefix: a follower position a leader recorded is backed by as much of the leader's log, while
   the follower has not moved past the leader's epoch (once it has, it may truncate against a later leader
   that never had those entries; the position then bounds no HW the proof needs).  Without the proof's
   ghost of the highest epoch each broker adopted, it reads the followers that hold an epoch. *)
FetchedPrefix ==
    \A l, f \in Brokers, p \in Partitions :
        (/\ role[l][p] = "leader" /\ follower_leo[l][p][f] >= 0
         /\ role[f][p] \in {"leader", "follower"} /\ local_leader_epoch[f][p] <= local_leader_epoch[l][p]) =>
            /\ follower_leo[l][p][f] <= Len(log[f][p])
            /\ SubSeq(log[f][p], 1, follower_leo[l][p][f]) = SubSeq(log[l][p], 1, follower_leo[l][p][f])

(* HwCommitted / CheckpointCommitted: a log below its HW (below its HW checkpoint) is committed. *)
\* (A zero HW or checkpoint is below nothing: IsPrefix(<<>>, C) holds.)
HwCommitted ==
    \A b \in Brokers, p \in Partitions :
        (role[b][p] # "absent" /\ hw[b][p] # 0) => IsPrefix(Prefix(log[b][p], hw[b][p]), h_committed[p])
CheckpointCommitted ==
    \A b \in Brokers, p \in Partitions :
        (role[b][p] # "absent" /\ hw_checkpoint[b][p] # 0)
            => IsPrefix(Prefix(log[b][p], hw_checkpoint[b][p]), h_committed[p])

(* CheckpointWithinLog: a log is never truncated below its HW checkpoint (the checkpoint is committed and
   every leader a truncation asks holds it). *)
CheckpointWithinLog ==
    \A b \in Brokers, p \in Partitions : role[b][p] # "absent" => hw_checkpoint[b][p] <= Len(log[b][p])

(* HwAtQuorum: a leader's HW is at least what its ISR's recorded positions allow; each step that raises
   that bound (a fetch, a produce, a shrink, becoming leader) advances the HW with it. *)
HwAtQuorum ==
    \A l \in Brokers, p \in Partitions :
        role[l][p] = "leader" => hw[l][p] >= AdvancedHw(l, log[l][p], -1, local_isr[l][p], follower_leo[l][p])

(* IsrHoldsCommitted / LeaderHoldsCommitted: every ISR member, and every broker leading in the store's
   epoch, starts with the committed prefix. *)
IsrHoldsCommitted ==
    \A p \in Partitions : \A x \in isr[p] : role[x][p] # "absent" => IsPrefix(h_committed[p], log[x][p])
LeaderHoldsCommitted ==
    \A l \in Brokers, p \in Partitions :
        (role[l][p] = "leader" /\ local_leader_epoch[l][p] = leader_epoch[p]) => IsPrefix(h_committed[p], log[l][p])

DataLemmas ==
    /\ EpochsMonotone /\ LogMatching /\ EpochPrefix /\ LeaderHoldsItsEpoch /\ EpochStartOffset /\ FollowerIsPrefix
    /\ FetchedPrefix /\ HwCommitted /\ CheckpointCommitted /\ CheckpointWithinLog /\ IsrHoldsCommitted /\ LeaderHoldsCommitted
    /\ HwAtQuorum

AllInvariants ==
    /\ TypeOK /\ OneLeaderPerEpoch /\ IsrSubsetOfReplicas /\ LeaderInIsr /\ HighWatermarkMonotonic /\ HighWatermarkWithinLog
    /\ NoCommittedDataLoss /\ ReplicaLogsAgree /\ ControllerEpochMonotonic /\ LeaderEpochMonotonic
    /\ StaleControllerFenced /\ ValidPartitionTransitions /\ ValidReplicaTransitions
=============================================================================
