package models_test

import (
	"testing"

	"lifeline/models"
)

func TestFold(t *testing.T) {
	for in, want := range map[string]string{
		"Kamińska Gabinet":             "kaminska gabinet",
		"KAMINSKA":                     "kaminska",
		"Łódź":                         "lodz",
		"ŻÓŁĆ  gęślą\tjaźń":            "zolc gesla jazn",
		"Źdźbło":                       "zdzblo",
		"Wiśniewska Design":            "wisniewska design",
		"NIP 526-104-08-28":            "nip 526-104-08-28",
		"FV/2026/10/0417":              "fv/2026/10/0417",
		"Crème brûlée, Müller, Dvořák": "creme brulee, muller, dvorak",
		"":                             "",
	} {
		if got := models.Fold(in); got != want {
			t.Errorf("Fold(%q) = %q, want %q", in, got, want)
		}
	}
	if got := models.SearchText("Kamińska · 2026-10", "", "NIP „5261040828” ma 9 cyfr"); got != "kaminska · 2026-10\nnip „5261040828” ma 9 cyfr" {
		t.Errorf("SearchText = %q", got)
	}
}
