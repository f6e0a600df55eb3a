{ kern-profile's FreePascal test unit: routines of several mangled shapes. }
unit crunch;
{$mode objfpc}{$modeswitch advancedrecords}
interface
type
  TVec = record
    x, y: LongInt;
    function Dot(const o: TVec): LongInt;
  end;
procedure QuickSort(var a: array of LongInt; lo, hi: LongInt);
function Sum(const a: array of LongInt): LongInt; overload;
function Sum(x, y: LongInt): LongInt; overload;
function Tick(n: LongInt): LongInt;
implementation
procedure QuickSort(var a: array of LongInt; lo, hi: LongInt);
  procedure Swap(i, j: LongInt);
  var t: LongInt;
  begin t := a[i]; a[i] := a[j]; a[j] := t; end;
var i, j, p: LongInt;
begin
  i := lo; j := hi; p := a[(lo + hi) div 2];
  repeat
    while a[i] < p do Inc(i);
    while a[j] > p do Dec(j);
    if i <= j then begin Swap(i, j); Inc(i); Dec(j); end;
  until i > j;
  if lo < j then QuickSort(a, lo, j);
  if i < hi then QuickSort(a, i, hi);
end;
function Sum(const a: array of LongInt): LongInt;
var k: LongInt;
begin Result := 0; for k := 0 to High(a) do Result := Result + a[k]; end;
function Sum(x, y: LongInt): LongInt; begin Result := x + y; end;
{ Exported under a name in no mangling scheme: named from DWARF. }
function Tick(n: LongInt): LongInt; public name 'crunch$tick';
begin Result := n * 3 + 1; end;
function TVec.Dot(const o: TVec): LongInt; begin Result := x * o.x + y * o.y; end;
end.
