------------------------------ MODULE TruncationHW ------------------------------
(***************************************************************************************)
(* The original design (before KIP-101): a replica that becomes a follower truncates    *)
(* its log to its own high watermark at once and then fetches; no leader-epoch         *)
(* exchange, no fencing of fetches, a follower joins the ISR once its fetch offset       *)
(* reaches the leader's HW, and a new leader exposes its HW at once.                    *)
(* impl: kcm.impl.design.Design.truncate_on_become_follower (truncation "hw").         *)
(*                                                                                     *)
(* kcm binds the core's era hooks to these definitions (HW_TruncationOffset for        *)
(* TruncationOffset, ...) for Truncation = "hw" (spec/tlc/config.py).                  *)
(***************************************************************************************)
EXTENDS KafkaReplication

\* Becoming a follower: truncate to the own HW (ReplicaManager._truncate(replica, replica.hw)).
HW_TruncateOnBecomeFollower == TRUE

HW_FenceCurrentLeaderEpoch == FALSE

\* Never used in this era (a follower never asks); defined as the leader's answer of the
\* implementation's non-KIP-101 branch of Design.epoch_end_answer, for completeness.
HW_EpochEndAnswer(lg, requested, current) ==
    LET e == LargestEpochAtMost(lg, requested, current)
    IN IF e = Undefined THEN <<Undefined, -1>> ELSE <<e, EndOffsetForEpoch(lg, e, current)>>
HW_TruncationOffset(lg, epoch, end) == Min(end, Len(lg))

\* Design.in_sync_for_expansion before KIP-320: the fetch offset reached the leader's HW.
HW_InSyncForExpansion(offset, leaderHw, epochStart) == offset >= leaderHw

\* A new leader exposes its HW at once (this is how KAFKA-2334 shows).
HW_ExposesHw(leaderHw, epochStart) == TRUE
=============================================================================
