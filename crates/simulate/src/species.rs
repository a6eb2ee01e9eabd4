//! Particle species the generator knows: PDG codes, masses, charges and lifetimes (PDG 2024).

/// A particle species with the properties propagation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Species {
    /// π±
    Pion,
    /// K±
    Kaon,
    /// p or p̄
    Proton,
    /// e±
    Electron,
    /// μ±
    Muon,
    /// γ
    Photon,
    /// π0 (decays at its production point)
    Pion0,
    /// K0_S
    KShort,
    /// Λ or Λ̄
    Lambda,
    /// n or n̄ (from Λ decays; not propagated)
    Neutron,
}

impl Species {
    /// Mass \[GeV\].
    pub fn mass(self) -> f64 {
        match self {
            Species::Pion => 0.139_570,
            Species::Kaon => 0.493_677,
            Species::Proton => 0.938_272,
            Species::Electron => 0.000_511,
            Species::Muon => 0.105_658,
            Species::Photon => 0.0,
            Species::Pion0 => 0.134_977,
            Species::KShort => 0.497_611,
            Species::Lambda => 1.115_683,
            Species::Neutron => 0.939_565,
        }
    }

    /// True for species that carry charge (the sign is chosen per particle).
    pub fn is_charged(self) -> bool {
        matches!(self, Species::Pion | Species::Kaon | Species::Proton | Species::Electron | Species::Muon)
    }

    /// True for hadrons that interact with nuclei in the material.
    pub fn is_hadron(self) -> bool {
        matches!(self, Species::Pion | Species::Kaon | Species::Proton)
    }

    /// Mean proper decay length cτ \[mm\]; infinity for species we treat as stable.
    pub fn c_tau(self) -> f64 {
        match self {
            Species::Pion => 7804.5,
            Species::Kaon => 3711.4,
            Species::KShort => 26.844,
            Species::Lambda => 78.90,
            _ => f64::INFINITY,
        }
    }

    /// PDG Monte Carlo code for a particle of this species with charge `q` (or, for neutral
    /// baryons, `q` = +1 for the particle and −1 for the antiparticle).
    pub fn pdg(self, q: i8) -> i32 {
        let s = if q >= 0 { 1 } else { -1 };
        match self {
            Species::Pion => 211 * s,
            Species::Kaon => 321 * s,
            Species::Proton => 2212 * s,
            // The electron (11) and the muon (13) carry negative charge.
            Species::Electron => -11 * s,
            Species::Muon => -13 * s,
            Species::Photon => 22,
            Species::Pion0 => 111,
            Species::KShort => 310,
            Species::Lambda => 3122 * s,
            Species::Neutron => 2112 * s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdg_codes_follow_the_convention() {
        assert_eq!(Species::Pion.pdg(1), 211);
        assert_eq!(Species::Pion.pdg(-1), -211);
        assert_eq!(Species::Electron.pdg(-1), 11);
        assert_eq!(Species::Electron.pdg(1), -11);
        assert_eq!(Species::Muon.pdg(-1), 13);
        assert_eq!(Species::Proton.pdg(-1), -2212);
        assert!(Species::KShort.c_tau() < Species::Lambda.c_tau());
        assert!(!Species::Photon.is_charged() && Species::Kaon.is_hadron());
    }
}
