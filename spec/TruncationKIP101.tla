----------------------------- MODULE TruncationKIP101 -----------------------------
(***************************************************************************************)
(* KIP-101: a new follower does not truncate to its HW; it first asks the leader        *)
(* (OffsetsForLeaderEpoch) for the end offset of the latest epoch in its own log and    *)
(* truncates to min(that end offset, its log end).  The leader answers with the start   *)
(* offset of the first epoch after the requested one in its log (its log end if none,   *)
(* or if the requested epoch is its own).  No fencing; ISR expansion and HW exposure as  *)
(* in the original design.                                                              *)
(* impl: Design.epoch_end_answer / Design.truncation_offset (kcm.impl.design) with     *)
(* truncation "kip101"; replica_log.kip101_truncation_offset.                          *)
(*                                                                                     *)
(* kcm binds the core's era hooks to these definitions (KIP101_TruncationOffset for    *)
(* TruncationOffset, ...) for Truncation = "kip101" (spec/tlc/config.py).              *)
(***************************************************************************************)
EXTENDS KafkaReplication

KIP101_TruncateOnBecomeFollower == FALSE
KIP101_FenceCurrentLeaderEpoch == FALSE

\* The leader answers for the requested epoch itself, whether or not its log has that epoch.
KIP101_EpochEndAnswer(lg, requested, current) == <<requested, EndOffsetForEpoch(lg, requested, current)>>

\* The follower truncates to the leader's end offset, capped by its own log end.
KIP101_TruncationOffset(lg, epoch, end) == Min(end, Len(lg))

KIP101_InSyncForExpansion(offset, leaderHw, epochStart) == offset >= leaderHw
KIP101_ExposesHw(leaderHw, epochStart) == TRUE
=============================================================================
