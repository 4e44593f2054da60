----------------------------- MODULE TruncationKIP279 -----------------------------
(***************************************************************************************)
(* KIP-279: the leader answers OffsetsForLeaderEpoch with the largest epoch of its log   *)
(* that is not newer than the requested one, and that epoch's end offset; the follower  *)
(* truncates to the minimum of the leader's end offset and its own end offset for that  *)
(* same epoch (and its log end).  An answer without an epoch makes it truncate to its   *)
(* HW.  No fencing by the current leader epoch; ISR expansion and HW exposure as in the *)
(* original design.                                                                     *)
(* impl: replica_log.largest_epoch_at_most, kip279_truncation_offset.                   *)
(*                                                                                     *)
(* kcm binds the core's era hooks to these definitions (KIP279_TruncationOffset for    *)
(* TruncationOffset, ...) for Truncation = "kip279" (spec/tlc/config.py).              *)
(***************************************************************************************)
EXTENDS KafkaReplication

KIP279_TruncateOnBecomeFollower == FALSE
KIP279_FenceCurrentLeaderEpoch == FALSE

KIP279_EpochEndAnswer(lg, requested, current) ==
    LET e == LargestEpochAtMost(lg, requested, current)
    IN IF e = Undefined THEN <<Undefined, -1>> ELSE <<e, EndOffsetForEpoch(lg, e, current)>>

\* Truncate to where the epoch both sides know ends on both sides.
KIP279_TruncationOffset(lg, epoch, end) ==
    Min(end, Min(EndOffsetForEpoch(lg, epoch, LatestEpoch(lg) + 1), Len(lg)))

KIP279_InSyncForExpansion(offset, leaderHw, epochStart) == offset >= leaderHw
KIP279_ExposesHw(leaderHw, epochStart) == TRUE
=============================================================================
