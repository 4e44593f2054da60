----------------------------- MODULE EagerIsrJoin -----------------------------
(* A follower joins the ISR whatever its fetch offset: a follower short of the HW can then be elected  *)
(* and the records it lacks, committed, are lost.                                                       *)
EXTENDS TruncationKIP320

EAGER_InSyncForExpansion(offset, leaderHw, epochStart) == TRUE
=============================================================================
