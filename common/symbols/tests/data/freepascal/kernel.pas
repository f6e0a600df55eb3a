{ kern-profile's FreePascal test program: calls the unit's routines. }
program kernel;
{$mode objfpc}
uses crunch;
var data: array[0..63] of LongInt; k: LongInt; v: TVec;
procedure Fill(seed: LongInt);
var i: LongInt;
begin for i := 0 to High(data) do begin seed := seed * 1103515245 + 12345; data[i] := seed; end; end;
procedure Spin;
begin for k := 0 to 9 do begin Fill(k); QuickSort(data, 0, High(data)); end; end;
begin
  Spin;
  v.x := Sum(data); v.y := Sum(1, 2); k := v.Dot(v) + Tick(k);
end.
