------------------------------- MODULE MCstaleepoch -------------------------------
(***************************************************************************************)
(* Without the leader-epoch check a broker applies a delayed LeaderAndIsr older than the *)
(* one it has.  Two brokers, controller 1, no records.  1's session expires and 1 is     *)
(* elected again (controller epoch 2): its failover sends LeaderAndIsr for leader epoch  *)
(* 0; 2 crashes and the broker change sends leader epoch 1.  Broker 1 takes epoch 1      *)
(* first, then the delayed epoch-0 request of the same controller epoch, and goes back.  *)
(* Violates LeaderEpochMonotonic.                                                        *)
(* MCstaleepochfixed.cfg: the same model with the check holds.                           *)
(***************************************************************************************)
EXTENDS TruncationKIP320, KafkaInvariants

MC_Assignment == [p \in Partitions |-> <<1, 2>>]

EpochsNext ==
    \/ ControllerNext \/ CrashNext \/ ExpiryNext \/ ControllerRequestsNext \/ ControllerDropNext
=============================================================================
