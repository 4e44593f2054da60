----------------------------- MODULE TruncationKIP320 -----------------------------
(***************************************************************************************)
(* KIP-320: the KIP-279 truncation, plus                                                *)
(*  - fencing: Fetch and OffsetsForLeaderEpoch carry the follower's current leader      *)
(*    epoch and a leader in another epoch refuses them (FENCED_LEADER_EPOCH /           *)
(*    UNKNOWN_LEADER_EPOCH), so no follower truncates or fetches from a stale leader's  *)
(*    state and no leader counts a stale follower's position;                           *)
(*  - the era's ISR expansion rule: a follower joins the ISR only once its fetch offset *)
(*    reached both the leader's HW and the leader's epoch start offset;                 *)
(*  - the KAFKA-2334 fix: a new leader withholds its HW until the HW reached its epoch  *)
(*    start offset (the HW it exposes never goes back across leaders).                  *)
(* impl: ReplicaManager._fence_error, Design.in_sync_for_expansion; the checker's      *)
(* _exposed_hw_check.                                                                   *)
(*                                                                                     *)
(* kcm binds the core's era hooks to these definitions (KIP320_TruncationOffset for    *)
(* TruncationOffset, ...) for Truncation = "kip320" (spec/tlc/config.py).              *)
(***************************************************************************************)
EXTENDS KafkaReplication

KIP320_TruncateOnBecomeFollower == FALSE
KIP320_FenceCurrentLeaderEpoch == TRUE

KIP320_EpochEndAnswer(lg, requested, current) ==
    LET e == LargestEpochAtMost(lg, requested, current)
    IN IF e = Undefined THEN <<Undefined, -1>> ELSE <<e, EndOffsetForEpoch(lg, e, current)>>

KIP320_TruncationOffset(lg, epoch, end) ==
    Min(end, Min(EndOffsetForEpoch(lg, epoch, LatestEpoch(lg) + 1), Len(lg)))

KIP320_InSyncForExpansion(offset, leaderHw, epochStart) == offset >= leaderHw /\ offset >= epochStart

KIP320_ExposesHw(leaderHw, epochStart) == leaderHw >= epochStart
=============================================================================
